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
