"""Exact k-anonymity by views with selections: the cell procedure (Yao, Wang & Jajodia 2005, Figure 5).

Each view v_i with selection C_i splits the tuples into the tuple sets of its projection facts,
F_ij = C_i ∧ (X_i = p_ij), and the complement F_i0 = ¬C_i (pairwise disjoint, Proposition 3). A
*cell* picks one per view and intersects them; the tuple set of a PF is the union of the cells that
pick it (Proposition 5), and its projections on ID and P are unions of the cells' projections.

A cell is a conjunction of fixed attribute values (from the PFs it picks: cells whose PFs disagree on
a shared attribute are empty, as in a natural join) and of selection conditions, true or false.
Quantifier elimination over the ``where`` grammar is done by representative values: the literals an
attribute is compared with and the values the views show, plus, per region between them, values
that behave alike (strings other than the literals; integers between two literals, enumerated up to
k + 1; reals between or beyond them). A representative standing for infinitely many values makes
the cell's projection *unbounded* (the paper's label): such a PF cannot violate. Exact for
comparisons with =, <>, IN on any type and all comparisons on numbers; order comparisons between
strings are treated as if strings other than the literals were one value (documented limitation).

Cost: the cells are a product over views (O(∏(n_i + 1)), polynomial in the PFs as the paper says,
exponential in the number of views), pruned as PFs disagree; each cell enumerates the representatives
of its free attributes. Meant for the views of modest size that carry selections; recomputed per
batch (the procedure is not maintained incrementally).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise, product
from typing import Any

import polars as pl

from streamdetect.checks.association_covers import minimal_covers
from streamdetect.checks.findings import AssociationCoverFinding
from streamdetect.model.predicates import Predicate, attributes_of, evaluate, literals_of
from streamdetect.model.topology import ViewDefinition


@dataclass(frozen=True)
class Representative:
    """A value standing for itself, or (``unbounded``) for infinitely many values that behave alike."""

    value: Any
    unbounded: bool = False


def representatives(known: set[Any], cap: int) -> list[Representative]:
    """Values covering every region the ``known`` literals split a domain into (module docstring)."""
    return _representatives(known, cap)


def _representatives(known: set[Any], cap: int) -> list[Representative]:
    numbers = [v for v in known if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if known and len(numbers) == len(known):
        ordered = sorted(set(numbers))
        found = [Representative(v) for v in ordered]
        found += [Representative(ordered[0] - 1, True), Representative(ordered[-1] + 1, True)]
        integral = all(isinstance(v, int) for v in ordered)
        for low, high in pairwise(ordered):
            if integral:
                between = list(range(int(low) + 1, int(min(high, low + cap + 2))))
                found += [Representative(v, i == cap + 1) for i, v in enumerate(between)]
            else:
                found.append(Representative((low + high) / 2, True))
        return found
    return [Representative(v) for v in sorted(known, key=str)] + [Representative("\0any other value", True)]


_FREE = object()  # an attribute a cell leaves free


@dataclass
class _Cell:
    fixed: dict[str, Any]
    constraints: list[tuple[Predicate, bool]]
    choices: tuple[int, ...]


@dataclass(frozen=True)
class SelectionCoverCheck:
    """Minimal association covers below k for views with selections (no FDs), by Figure 5."""

    views: tuple[ViewDefinition, ...]
    identifiers: tuple[str, ...]
    sensitive: tuple[str, ...]
    k: int = 2

    def run(
        self, frames: Mapping[str, pl.DataFrame], table: pl.DataFrame | None = None
    ) -> list[AssociationCoverFinding]:
        """Every minimal cover below k, for every (ID, P) pair held by the views (``table`` unused)."""
        rows = {view.name: frames[view.name].select(view.attributes).unique().rows() for view in self.views}
        known: dict[str, set[Any]] = {}
        for view in self.views:
            for position, attribute in enumerate(view.attributes):
                known.setdefault(attribute, set()).update(row[position] for row in rows[view.name])
            if view.where is not None:
                for attribute, value in literals_of(view.where):
                    known.setdefault(attribute, set()).add(value)
        representatives = {a: _representatives(values, self.k) for a, values in known.items()}
        cells = list(self._cells(rows))
        findings: list[AssociationCoverFinding] = []
        for identifier in self.identifiers:
            for sensitive in self.sensitive:
                if identifier in known and sensitive in known:
                    findings.extend(self._covers(cells, rows, representatives, identifier, sensitive))
        return findings

    def _cells(self, rows: Mapping[str, list[tuple[Any, ...]]]) -> Iterator[_Cell]:
        """The cells: one choice per view (a row, or 0 for a tuple outside its selection), consistent.

        Built view by view as a hash join: a cell meets only the rows that agree with the values it has
        fixed, looked up in an index of the view's rows on those attributes (one index per set of fixed
        attributes), instead of scanning every row per cell.
        """
        cells = [_Cell({}, [], ())]
        for view in self.views:
            grown = []
            listed = [
                (number, dict(zip(view.attributes, row, strict=True)))
                for number, row in enumerate(rows[view.name], start=1)
                if None not in row
            ]
            indexes: dict[tuple[str, ...], dict[tuple[Any, ...], list[tuple[int, dict[str, Any]]]]] = {}
            for cell in cells:
                shared = tuple(a for a in view.attributes if a in cell.fixed)
                index = indexes.get(shared)
                if index is None:
                    index = {}
                    for number, values in listed:
                        index.setdefault(tuple(values[a] for a in shared), []).append((number, values))
                    indexes[shared] = index
                for number, values in index.get(tuple(cell.fixed[a] for a in shared), ()):
                    constraints = cell.constraints + ([(view.where, True)] if view.where is not None else [])
                    candidate = _Cell({**cell.fixed, **values}, constraints, (*cell.choices, number))
                    if _consistent(candidate):
                        grown.append(candidate)
                if view.where is not None:
                    candidate = _Cell(dict(cell.fixed), [*cell.constraints, (view.where, False)], (*cell.choices, 0))
                    if _consistent(candidate):
                        grown.append(candidate)
            cells = grown
        yield from cells

    def _covers(
        self,
        cells: Sequence[_Cell],
        rows: Mapping[str, list[tuple[Any, ...]]],
        representatives: Mapping[str, list[Representative]],
        identifier: str,
        sensitive: str,
    ) -> list[AssociationCoverFinding]:
        # Per PF (view position, row number): the identifier values and sensitive values of its cells.
        ids: dict[tuple[int, int], set[Any]] = {}
        values: dict[tuple[int, int], set[Any]] = {}
        many = object()  # marks an unbounded projection
        # A cell's projections depend only on its constraints and on its values of the attributes they
        # mention and of the identifier and sensitive attributes: cells alike there share one projection.
        memo: dict[tuple[object, ...], tuple[set[Any] | None, set[Any] | None] | None] = {}
        for cell in cells:
            relevant = {a for predicate, _ in cell.constraints for a in attributes_of(predicate)}
            relevant |= {identifier, sensitive}
            alike = (
                tuple((a, cell.fixed.get(a, _FREE)) for a in sorted(relevant)),
                tuple((id(predicate), expected) for predicate, expected in cell.constraints),
            )
            if alike not in memo:
                memo[alike] = _project(cell, representatives, identifier, sensitive)
            projections = memo[alike]
            if projections is None:
                continue  # an empty cell
            cell_ids, cell_values = projections
            for position, number in enumerate(cell.choices):
                if number == 0:
                    continue
                ids.setdefault((position, number), set()).update(cell_ids if cell_ids is not None else {many})
                values.setdefault((position, number), set()).update(cell_values if cell_values is not None else {many})
        covers: dict[tuple[Any, frozenset[Any]], set[str]] = {}
        for key, found in ids.items():
            linked = values.get(key, set())
            if len(found) == 1 and many not in found and many not in linked and len(linked) < self.k:
                covers.setdefault((next(iter(found)), frozenset(linked)), set()).add(self.views[key[0]].name)
        findings = []
        for value, cover, names in minimal_covers(covers):
            findings.append(
                AssociationCoverFinding(
                    k=self.k,
                    identifier_attribute=identifier,
                    identifier_value=value,
                    sensitive_attribute=sensitive,
                    sensitive_values=tuple(sorted(cover, key=str)),
                    views=tuple(sorted(names)),
                )
            )
        return sorted(findings, key=lambda f: (str(f.identifier_value), f.sensitive_values))


def _consistent(cell: _Cell) -> bool:
    """False when a constraint whose attributes are all fixed already fails."""
    for predicate, expected in cell.constraints:
        if all(a in cell.fixed for a in attributes_of(predicate)) and evaluate(predicate, cell.fixed) is not expected:
            return False
    return True


def _project(
    cell: _Cell, representatives: Mapping[str, list[Representative]], identifier: str, sensitive: str
) -> tuple[set[Any] | None, set[Any] | None] | None:
    """The cell's identifier and sensitive values (None: unbounded), or None when the cell is empty."""
    mentioned = {a for predicate, _ in cell.constraints for a in attributes_of(predicate)}
    free = sorted((mentioned | {identifier, sensitive}) - set(cell.fixed))
    options = [representatives.get(a, [Representative("\0any other value", True)]) for a in free]
    ids: set[Any] | None = set()
    values: set[Any] | None = set()
    satisfiable = False
    for combination in product(*options):
        assignment = {**cell.fixed, **{a: r.value for a, r in zip(free, combination, strict=True)}}
        if not all(evaluate(predicate, assignment) is expected for predicate, expected in cell.constraints):
            continue
        satisfiable = True
        chosen = dict(zip(free, combination, strict=True))
        for attribute, target in ((identifier, "ids"), (sensitive, "values")):
            representative = chosen.get(attribute)
            if representative is not None and representative.unbounded:
                if target == "ids":
                    ids = None
                else:
                    values = None
            elif target == "ids" and ids is not None:
                ids.add(assignment[attribute])
            elif target == "values" and values is not None:
                values.add(assignment[attribute])
    return (ids, values) if satisfiable else None


def satisfiable(fixed: Mapping[str, Any], conditions: Sequence[Predicate], cap: int = 2) -> bool:
    """Whether some tuple with the ``fixed`` values satisfies every condition (quantifier elimination
    by representative values, as for the cells)."""
    known: dict[str, set[Any]] = {a: {v} for a, v in fixed.items()}
    for condition in conditions:
        for attribute, value in literals_of(condition):
            known.setdefault(attribute, set()).add(value)
    representatives = {a: _representatives(values, cap) for a, values in known.items()}
    cell = _Cell(dict(fixed), [(condition, True) for condition in conditions], ())
    # No projection is wanted: a placeholder attribute stands for both.
    return _project(cell, representatives, "\0none", "\0none") is not None
