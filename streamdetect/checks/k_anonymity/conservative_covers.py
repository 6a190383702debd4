"""Conservative k-anonymity by views with functional dependencies (Yao, Wang & Jajodia 2005, section 7).

With effective FDs exact checking is Σ2p-hard (Theorem 4), so streamdetect checks the necessary
condition of Theorem 6 with the *complete signature function* (section 7.2): for a private value b,
f(b) is the multiset Π_{L_C ∪ L_F} σ_{P=b}(v_P) of every view v_P holding P, where L_C are the
attributes of v_P found in another view linkable to the identifier's view (through common attributes
or an FD across them, transitively) and L_F those in an FD with an attribute of such a view. Values
with equal signatures are symmetric (Proposition 10). Figure 9, with the current table as the
instance I: for each association (a, b) of the table, find k - 1 values symmetric to b that a is not
associated with; when they do not exist, k-anonymity may be violated for a: a finding with
``exact`` false whose values are b and the symmetric values found. Never misses a violation
(Theorem 6); may report one that is not.

Publisher-side: it needs the table's rows. Cost: one group-by per view holding P, then one pass over
the table's associations.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import product
from typing import Any

import polars as pl

from streamdetect.checks.findings import AssociationCoverFinding
from streamdetect.checks.k_anonymity.selection_covers import representatives
from streamdetect.errors import TopologyError
from streamdetect.model.predicates import Predicate, evaluate, literals_of
from streamdetect.model.topology import FunctionalDependency, ViewDefinition


@dataclass(frozen=True)
class ConservativeCoverCheck:
    """Figure 9 with complete signatures; ``dependencies`` are the effective FDs."""

    views: tuple[ViewDefinition, ...]
    identifiers: tuple[str, ...]
    sensitive: tuple[str, ...]
    dependencies: tuple[FunctionalDependency, ...]
    k: int = 2

    def _linked_by_fd(self, left: set[str], right: set[str]) -> bool:
        return any(
            (set(fd.lhs) <= left and set(fd.rhs) & right) or (set(fd.lhs) <= right and set(fd.rhs) & left)
            for fd in self.dependencies
        )

    def linkable(self, identifier: str) -> list[ViewDefinition]:
        """Views linkable to a view holding the identifier: common attributes or an FD, transitively."""
        reached = [view for view in self.views if identifier in view.attributes]
        frontier = list(reached)
        while frontier:
            current = frontier.pop()
            held = set(current.attributes) | current.selection_attributes
            for view in self.views:
                if view in reached:
                    continue
                other = set(view.attributes) | view.selection_attributes
                if held & other or self._linked_by_fd(held, other):
                    reached.append(view)
                    frontier.append(view)
        return reached

    def signature_attributes(self, holder: ViewDefinition, identifier: str, sensitive: str) -> list[str]:
        """L_C ∪ L_F of a view holding P (all its other attributes when it also holds the identifier)."""
        others = [view for view in self.linkable(identifier) if view is not holder]
        elsewhere = {a for view in others for a in (*view.attributes, *view.selection_attributes)}
        chosen = []
        for attribute in holder.attributes:
            if attribute == sensitive:
                continue
            in_fd = any(
                (attribute in fd.lhs and set(fd.rhs) & elsewhere) or (attribute in fd.rhs and set(fd.lhs) & elsewhere)
                for fd in self.dependencies
            )
            if identifier in holder.attributes or attribute in elsewhere or in_fd:
                chosen.append(attribute)
        return chosen

    def run(self, views: Mapping[str, pl.DataFrame], table: pl.DataFrame | None) -> list[AssociationCoverFinding]:
        """Possible violations, per (identifier, sensitive) pair, sorted. Needs the table's rows."""
        if table is None:
            raise TopologyError(
                "k-anonymity with effective functional dependencies is checked conservatively "
                "against the private table: set table.source",
                key="table.source",
            )
        findings = []
        for identifier in self.identifiers:
            for sensitive in self.sensitive:
                findings.extend(self._pair(views, table, identifier, sensitive))
        return sorted(findings, key=lambda f: (f.identifier_attribute, f.sensitive_attribute, str(f.identifier_value)))

    def _pair(
        self, views: Mapping[str, pl.DataFrame], table: pl.DataFrame, identifier: str, sensitive: str
    ) -> list[AssociationCoverFinding]:
        holders = [view for view in self.views if sensitive in view.attributes]
        if not holders or not any(identifier in view.attributes for view in self.views):
            return []
        signatures: dict[Any, list[Any]] = {}
        unshown: set[tuple[Any, ...]] = set()
        if any(view.where is not None for view in self.views):
            signatures = _swap_signatures(self.views, views, table, sensitive)
            unshown = _unshown_signatures(self.views, sensitive)
        for holder in holders if not signatures else []:
            columns = self.signature_attributes(holder, identifier, sensitive)
            rows = views[holder.name].drop_nulls(sensitive)
            for value, group in rows.group_by(sensitive):
                projected = Counter(group.select(columns).rows()) if columns else Counter({(): group.height})
                signatures.setdefault(value[0], []).append(tuple(sorted(projected.items(), key=repr)))
        classes: dict[tuple[Any, ...], set[Any]] = {}
        for value, parts in signatures.items():
            classes.setdefault(tuple(parts), set()).add(value)
        symmetric = {value: members for members in classes.values() for value in members}
        associations = table.select(identifier, sensitive).drop_nulls().unique()
        held: dict[Any, set[Any]] = {}
        for a, b in associations.iter_rows():
            held.setdefault(a, set()).add(b)
        findings = []
        names = tuple(sorted(view.name for view in holders))
        for a, b in associations.sort([identifier, sensitive]).iter_rows():
            if tuple(signatures.get(b, ())) in unshown:
                continue  # b swaps with infinitely many values no row holds: never fewer than k
            others = sorted((symmetric.get(b, {b}) - {b}) - held[a], key=str)
            if len(others) < self.k - 1:
                findings.append(
                    AssociationCoverFinding(
                        k=self.k,
                        identifier_attribute=identifier,
                        identifier_value=a,
                        sensitive_attribute=sensitive,
                        sensitive_values=tuple(sorted([b, *others], key=str)),
                        views=names,
                        exact=False,
                    )
                )
        return findings


def _swap_signatures(
    definitions: Sequence[ViewDefinition],
    views: Mapping[str, pl.DataFrame],
    table: pl.DataFrame,
    sensitive: str,
) -> dict[Any, list[Any]]:
    """Signatures under which equal values can be swapped in every tuple of an instance (views with
    selections). Renaming b1 <-> b2 in column P maps an instance to another one that keeps every FD
    (a bijection on P's values) and yields the same views when (1) every view projecting P shows the
    same rows for b1 as for b2 (other columns), and (2) every selection mentioning P is true for the
    same tuples whichever of b1, b2 they hold (compared over representative values of its other
    attributes). So equal signatures imply symmetric values (Yao et al., section 7), with any
    selections and FDs: finer than the complete signature, still sound."""
    values = set(table.get_column(sensitive).drop_nulls().to_list())
    for definition in definitions:
        if sensitive in definition.attributes:
            values |= set(views[definition.name].get_column(sensitive).drop_nulls().to_list())
    signatures: dict[Any, list[Any]] = {value: [] for value in values}
    for definition in definitions:
        if sensitive in definition.attributes:
            others = [a for a in definition.attributes if a != sensitive]
            rows = views[definition.name].drop_nulls(sensitive)
            shown: dict[Any, frozenset[Any]] = {
                key[0]: frozenset(group.select(others).rows()) for key, group in rows.group_by(sensitive)
            }
            for value in values:
                signatures[value].append(shown.get(value, frozenset()))
        if definition.where is not None and sensitive in definition.selection_attributes:
            for value in values:
                signatures[value].append(_truth_table(definition.where, sensitive, value))
    return signatures


def _unshown_signatures(definitions: Sequence[ViewDefinition], sensitive: str) -> set[tuple[Any, ...]]:
    """The swap signatures of the values of P that no row holds and no view shows, one per region of
    values that every selection mentioning P treats alike and that holds infinitely many (representatives
    of the literals P is compared with, as for the cells). Such a value is shown by no view projecting P
    and makes each selection true for the same tuples as its region; a value of the table with the same
    signature swaps with every one of them (none is associated with any identifier), so it has k - 1
    symmetric values whatever k: Theorem 6 clears it. A view that selects no row hides P's values this way."""
    literals = {
        value
        for definition in definitions
        if definition.where is not None
        for attribute, value in literals_of(definition.where)
        if attribute == sensitive
    }
    found = set()
    for region in representatives(literals, 2):
        if not region.unbounded:
            continue
        parts: list[Any] = []
        for definition in definitions:
            if sensitive in definition.attributes:
                parts.append(frozenset())
            if definition.where is not None and sensitive in definition.selection_attributes:
                parts.append(_truth_table(definition.where, sensitive, region.value))
        found.add(tuple(parts))
    return found


def _truth_table(condition: Predicate, sensitive: str, value: Any) -> tuple[bool | None, ...]:
    """The condition with P = value, over representatives of its other attributes' regions."""
    known: dict[str, set[Any]] = {}
    for attribute, literal in literals_of(condition):
        if attribute != sensitive:
            known.setdefault(attribute, set()).add(literal)
    others = sorted(known)
    options = [[r.value for r in representatives(known[a], 2)] for a in others]
    return tuple(
        evaluate(condition, {**dict(zip(others, combination, strict=True)), sensitive: value})
        for combination in product(*options)
    )
