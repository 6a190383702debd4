"""Brute-force references written from the papers' definitions, for property tests.

Deliberately naive: Python sets and nested loops, no polars, no networkx.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

Row = dict[str, Any]


def connected(views: dict[str, tuple[str, ...]], members: tuple[str, ...]) -> bool:
    """Are the views connected through shared attribute names?"""
    reached = {members[0]}
    frontier = [members[0]]
    while frontier:
        current = frontier.pop()
        for other in members:
            if other not in reached and set(views[current]) & set(views[other]):
                reached.add(other)
                frontier.append(other)
    return len(reached) == len(members)


def channels(views: dict[str, tuple[str, ...]]) -> list[tuple[str, ...]]:
    """Every connected subset of views (Dou & Coulondre's leveled closure), sorted names."""
    names = sorted(views)
    return [
        members
        for size in range(1, len(names) + 1)
        for members in combinations(names, size)
        if connected(views, members)
    ]


def natural_join(relations: list[list[Row]]) -> list[Row]:
    """Nested-loop natural join with SQL null semantics (a null never matches)."""
    result: list[Row] = [{}]
    for relation in relations:
        joined = []
        for left in result:
            for right in relation:
                shared = set(left) & set(right)
                if all(left[a] is not None and left[a] == right[a] for a in shared):
                    joined.append({**left, **right})
        result = joined
    unique = {tuple(sorted(row.items(), key=lambda item: item[0])) for row in result}
    return [dict(items) for items in unique]


def finding_tuples(findings: list[Any]) -> set[tuple[Any, ...]]:
    """Linkage findings in :func:`linkage_reference`'s form."""
    return {
        (
            f.identifier_attribute,
            f.identifier_value,
            f.sensitive_attribute,
            f.level,
            f.channels,
            tuple(sorted(f.sensitive_values, key=str)),
        )
        for f in findings
    }


def linkage_reference(
    views: dict[str, tuple[str, ...]],
    rows: dict[str, list[Row]],
    identifiers: list[str],
    sensitive: list[str],
    k: int,
) -> set[tuple[Any, ...]]:
    """Findings as (E, e, S, level, channels at that level, values linked in the first of them)."""
    linked: dict[tuple[str, Any, str], dict[tuple[str, ...], set[Any]]] = {}
    for members in channels(views):
        schema = {a for name in members for a in views[name]}
        joined = natural_join([rows[name] for name in members])
        for e in identifiers:
            for s in sensitive:
                if e not in schema or s not in schema:
                    continue
                per_value: dict[Any, set[Any]] = {}
                for row in joined:
                    if row[e] is not None and row[s] is not None:
                        per_value.setdefault(row[e], set()).add(row[s])
                for value, values in per_value.items():
                    linked.setdefault((e, value, s), {})[members] = values
    findings = set()
    for (e, value, s), by_channel in linked.items():
        disclosing = sorted((len(members), members) for members, values in by_channel.items() if len(values) < k)
        if not disclosing:
            continue
        level = disclosing[0][0]
        at_level = tuple(members for size, members in disclosing if size == level)
        values = tuple(sorted(by_channel[at_level[0]], key=str))
        findings.add((e, value, s, level, at_level, values))
    return findings


def satisfies(instance: list[Row], dependencies: list[tuple[tuple[str, ...], str]]) -> bool:
    """Does the instance satisfy every FD lhs -> rhs?"""
    for lhs, rhs in dependencies:
        seen: dict[tuple[Any, ...], Any] = {}
        for row in instance:
            key = tuple(row[a] for a in lhs)
            if seen.setdefault(key, row[rhs]) != row[rhs]:
                return False
    return True


def instances(
    attributes: tuple[str, ...],
    views: dict[str, tuple[str, ...]],
    rows: dict[str, list[Row]],
    dependencies: list[tuple[tuple[str, ...], str]] | None = None,
) -> list[list[Row]]:
    """Every table instance over the views' values whose projections are exactly the views (Yao's I^v),
    and that satisfies the FDs.

    Projection-only views. Brute force: every tuple over the product of the values seen per
    attribute, every subset of the admissible ones.
    """
    from itertools import product

    domains = {
        a: sorted({row[a] for name, schema in views.items() if a in schema for row in rows[name]}) for a in attributes
    }
    # An attribute no view releases is unconstrained: one placeholder value stands for its domain.
    domains = {a: values or ["\0any"] for a, values in domains.items()}
    projected = {name: {tuple(row[a] for a in schema) for row in rows[name]} for name, schema in views.items()}
    candidates = [
        dict(zip(attributes, values, strict=True))
        for values in product(*(domains[a] for a in attributes))
        if all(tuple(values[attributes.index(a)] for a in schema) in projected[name] for name, schema in views.items())
    ]
    found = []
    for mask in range(1 << len(candidates)):
        chosen = [t for i, t in enumerate(candidates) if mask >> i & 1]
        yields = all({tuple(t[a] for a in schema) for t in chosen} == projected[name] for name, schema in views.items())
        if yields and satisfies(chosen, dependencies or []):
            found.append(chosen)
    return found


def association_cover_reference(
    attributes: tuple[str, ...],
    views: dict[str, tuple[str, ...]],
    rows: dict[str, list[Row]],
    identifiers: list[str],
    sensitive: list[str],
    k: int,
    dependencies: list[tuple[tuple[str, ...], str]] | None = None,
) -> set[tuple[str, Any, str, frozenset[Any]]]:
    """Minimal association covers smaller than k, from the definition (Yao, Wang & Jajodia 2005, section 3)."""
    possible = instances(attributes, views, rows, dependencies)
    covers = set()
    for e in identifiers:
        for s in sensitive:
            secrets = [{(t[e], t[s]) for t in instance} for instance in possible]
            values = sorted({pair[0] for secret in secrets for pair in secret})
            targets = sorted({pair[1] for secret in secrets for pair in secret})
            for a in values:
                found: list[frozenset[Any]] = []
                for size in range(1, k):
                    for chosen in combinations(targets, size):
                        candidate = frozenset(chosen)
                        if any(smaller < candidate for smaller in found):
                            continue
                        if all(any((a, b) in secret for b in candidate) for secret in secrets):
                            found.append(candidate)
                covers.update((e, a, s, cover) for cover in found)
    return covers


def sind_reference(
    public_rows: list[dict[str, Any]],
    private: list[Any],
    domain: list[Any],
    views: list[tuple[tuple[str, ...], Any]],
    attribute: str,
) -> tuple[list[set[int]], list[set[Any]], list[tuple[Any, ...]]]:
    """SIND classes from Definition 1 by enumerating every instance, each tuple's possible values, and
    the instances (as private-value assignments).

    ``views`` are (projection, selection as a Python predicate on a row dict); view results are
    multisets. Returns the classes (sets of row positions) and the possible private values per row.
    """
    from collections import Counter
    from itertools import product

    def released(assignment: tuple[Any, ...]) -> list[Counter[tuple[Any, ...]]]:
        rows = [{**row, attribute: value} for row, value in zip(public_rows, assignment, strict=True)]
        return [
            Counter(tuple(r[a] for a in projection) for r in rows if selection(r)) for projection, selection in views
        ]

    actual = released(tuple(private))
    possible_instances = [a for a in product(domain, repeat=len(public_rows)) if released(a) == actual]
    valid = set(possible_instances)
    n = len(public_rows)

    def swappable(i: int, j: int) -> bool:
        for assignment in possible_instances:
            swapped = list(assignment)
            swapped[i], swapped[j] = swapped[j], swapped[i]
            if tuple(swapped) not in valid:
                return False
        return True

    classes: list[set[int]] = []
    for i in range(n):
        for group in classes:
            if swappable(i, next(iter(group))):
                group.add(i)
                break
        else:
            classes.append({i})
    possible = [{a[i] for a in possible_instances} for i in range(n)]
    return classes, possible, possible_instances


FRESH = -1  # a value no view publishes and no selection names: stands for every such value


def possible_identifier_values(
    attributes: tuple[str, ...],
    identifier: str,
    sensitive: str,
    views: dict[str, tuple[tuple[str, ...], Any]],
    rows: dict[str, set[tuple[Any, ...]]],
) -> dict[Any, set[Any]]:
    """Per published identifier value e, every value of ``sensitive`` its tuple takes in some instance.

    An instance is a table in which ``identifier`` is a key and whose views (``views``: name ->
    (schema, selection as a Python predicate on a row dict)), as sets, equal ``rows``. Brute force:
    every published e gets one tuple over the values seen (plus one fresh value per attribute), every
    combination is tried; tuples of unpublished identifier values are added freely (any tuple whose
    view rows are all published), which is sound because adding such a tuple never breaks a view.
    """
    from itertools import product

    def released(row: Row) -> list[tuple[str, tuple[Any, ...]]]:
        return [(name, tuple(row[a] for a in schema)) for name, (schema, where) in views.items() if where(row)]

    def sound(row: Row) -> bool:
        return all(projected in rows[name] for name, projected in released(row))

    others = [a for a in attributes if a != identifier]
    domains = {
        a: [
            *sorted({r[schema.index(a)] for name, (schema, _) in views.items() if a in schema for r in rows[name]}),
            FRESH,
        ]
        for a in others
    }
    combos = [dict(zip(others, values, strict=True)) for values in product(*(domains[a] for a in others))]
    published = sorted(
        {r[schema.index(identifier)] for name, (schema, _) in views.items() if identifier in schema for r in rows[name]}
    )
    per_value = [[{identifier: e, **c} for c in combos if sound({identifier: e, **c})] for e in published]
    free: set[tuple[str, tuple[Any, ...]]] = set()
    for c in combos:
        row = {identifier: FRESH, **c}
        if sound(row):
            free.update(released(row))
    everything = {(name, r) for name, published_rows in rows.items() for r in published_rows}
    possible: dict[Any, set[Any]] = {e: set() for e in published}
    for choice in product(*per_value):
        covered = {fact for row in choice for fact in released(row)}
        if everything <= covered | free:
            for row in choice:
                possible[row[identifier]].add(row[sensitive])
    return possible
