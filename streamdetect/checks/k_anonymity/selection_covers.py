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

Cost: enumerated, the cells are a product over views (O(∏(n_i + 1)), polynomial in the PFs as the
paper says, exponential in the number of views), pruned as PFs disagree; each cell enumerates the
representatives of its free attributes. By default (``method="auto"``) the cells are not enumerated but
aggregated per pattern of selected views a tuple falls outside of: the cells of a pattern are the join
of the chosen views' rows with the selections as row filters, and a PF's values over its cells are
capped linked values through that join (O(2^s) joins for s selected views; docs/design.md gives the
reading). Cells are enumerated only where a selection mixes fixed and free attributes that matter
elsewhere. Recomputed per batch (not maintained incrementally).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise, product
from typing import Any

import polars as pl

from streamdetect.checks.findings import AssociationCoverFinding
from streamdetect.checks.k_anonymity.association_covers import minimal_covers
from streamdetect.model.predicates import Predicate, attributes_of, evaluate, literals_of
from streamdetect.model.topology import ViewDefinition
from streamdetect.relational.linked_values import linked_values


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
    #: "auto": aggregate the cells per pattern by joins when every selection allows it, else enumerate them;
    #: "enumerate": always enumerate (Figure 5 as printed); "aggregate": refuse selections that need cells.
    method: str = "auto"

    def __post_init__(self) -> None:
        if self.method not in {"auto", "enumerate", "aggregate"}:
            raise ValueError(f"unknown cell method {self.method!r}: use 'auto', 'enumerate' or 'aggregate'")

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
        cells: list[_Cell] | None = None
        findings: list[AssociationCoverFinding] = []
        for identifier in self.identifiers:
            for sensitive in self.sensitive:
                if identifier not in known or sensitive not in known:
                    continue
                sets = None
                if self.method != "enumerate":
                    sets = self._aggregated(frames, representatives, identifier, sensitive)
                if sets is None:
                    if self.method == "aggregate":
                        raise ValueError("the selections need the enumerated cells (method 'enumerate' or 'auto')")
                    cells = list(self._cells(rows)) if cells is None else cells
                    sets = self._enumerated(cells, representatives, identifier, sensitive)
                findings.extend(self._covers(*sets, identifier, sensitive))
        return findings

    def _aggregated(
        self,
        frames: Mapping[str, pl.DataFrame],
        representatives: Mapping[str, list[Representative]],
        identifier: str,
        sensitive: str,
    ) -> tuple[dict[tuple[int, int], set[Any]], dict[tuple[int, int], set[Any]]] | None:
        """Per PF, its identifier and sensitive values over its cells, without enumerating the cells; None
        when a selection needs them (:func:`_pattern_relations`).

        The cells that choose a row in the same views (a *pattern*: which selected views a tuple falls
        outside of) are the natural join of those views' rows, the selections being row filters. A PF's
        values over its cells are then linked values through that join, capped (2 identifier values, k
        sensitive values: all a cover needs), by :func:`~streamdetect.relational.linked_values.linked_values`;
        an attribute no chosen view holds is free, so unbounded. O(2^s) joins for s selected views, each
        about linear in the rows instead of the product of the views.
        """
        ids: dict[tuple[int, int], set[Any]] = {}
        values: dict[tuple[int, int], set[Any]] = {}
        # A PF is a distinct row of its view: numbered once, so that every pattern names it alike.
        numbered = {
            view.name: frames[view.name]
            .select(view.attributes)
            .drop_nulls()
            .unique()
            .with_row_index(_row(position), offset=1)
            for position, view in enumerate(self.views)
        }
        selected = [i for i, view in enumerate(self.views) if view.where is not None]
        for outside in product([False, True], repeat=len(selected)):
            out = {i for i, o in zip(selected, outside, strict=True) if o}
            pattern = _pattern_relations(self.views, numbered, out, representatives, (identifier, sensitive))
            if pattern is _NEEDS_CELLS:
                return None
            if not isinstance(pattern, _Pattern):
                continue  # no tuple falls in this pattern
            relations = pattern.relations
            held = {a for frame in relations.values() for a in frame.columns}
            for position, view in enumerate(self.views):
                if position in out:
                    continue
                # Only the PF's own view keeps its row numbers (the others' would be joined on).
                source = _row(position)
                named = {
                    name: frame.select(c for c in frame.columns if not c.startswith(_ROW) or c == source)
                    for name, frame in relations.items()
                }
                caps = ((identifier, 2), (sensitive, self.k))
                linked = {a: linked_values(named, source, a, cap) for a, cap in caps if a in held}
                # Every PF with a cell is linked to some value of any attribute the pattern fixes (its own
                # view's, when neither the identifier nor the sensitive attribute is).
                reached = next(iter(linked.values()), None)
                if reached is None:
                    reached = linked_values(named, source, view.attributes[0], 1)
                present = reached.get_column(source).unique().to_list()
                for attribute, target, free in (
                    (identifier, ids, pattern.free_ids),
                    (sensitive, values, pattern.free_values),
                ):
                    for number in present:
                        target.setdefault((position, number), set())
                    if attribute not in linked:
                        for number in present:  # free: the selections' representatives, or unbounded
                            target[(position, number)].update({_MANY} if free is None else free)
                        continue
                    for number, value in linked[attribute].iter_rows():
                        target[(position, number)].add(value)
        return ids, values

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

    def _enumerated(
        self,
        cells: Sequence[_Cell],
        representatives: Mapping[str, list[Representative]],
        identifier: str,
        sensitive: str,
    ) -> tuple[dict[tuple[int, int], set[Any]], dict[tuple[int, int], set[Any]]]:
        """Per PF (view position, row number): the identifier values and sensitive values of its cells, by
        enumerating the cells (Figure 5 as printed). O(cells)."""
        ids: dict[tuple[int, int], set[Any]] = {}
        values: dict[tuple[int, int], set[Any]] = {}
        many = _MANY
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
        return ids, values

    def _covers(
        self,
        ids: Mapping[tuple[int, int], set[Any]],
        values: Mapping[tuple[int, int], set[Any]],
        identifier: str,
        sensitive: str,
    ) -> list[AssociationCoverFinding]:
        """The minimal covers below k from the PFs' identifier and sensitive values."""
        many = _MANY
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


_MANY = object()  # marks an unbounded projection


@dataclass(frozen=True)
class _Pattern:
    """The cells choosing a row in the same views: the views' rows (filtered), and the values of the
    identifier and sensitive attributes when free (None: unbounded)."""

    relations: dict[str, pl.DataFrame]
    free_ids: set[Any] | None
    free_values: set[Any] | None


_NEEDS_CELLS = object()  # a pattern whose selections the joins cannot express
_ROW = "\0row"


def _pattern_relations(
    views: Sequence[ViewDefinition],
    frames: Mapping[str, pl.DataFrame],
    outside: set[int],
    representatives: Mapping[str, list[Representative]],
    projected: tuple[str, str],
) -> _Pattern | object | None:
    """The chosen views' rows (distinct, numbered) for one pattern, each selection applied as a row filter;
    None when the pattern holds no tuple, ``_NEEDS_CELLS`` when a selection cannot be a row filter.

    A selection becomes a filter when one chosen view holds every attribute it reads (the natural join
    makes that view's values the tuple's). A selection reading only attributes no chosen view holds
    constrains free attributes only, alike for every cell: the pattern is empty unless those selections
    can hold together, and they bound the identifier's and sensitive attribute's values when free
    (representative values, as for a cell). A selection reading fixed and free attributes is a row filter
    of the view holding the fixed ones when its free attributes matter to nothing else; any other mix
    needs the cells.
    """
    chosen = [i for i in range(len(views)) if i not in outside]
    if not chosen:
        return None
    relations = {views[i].name: frames[views[i].name] for i in chosen}
    fixed = {a for i in chosen for a in views[i].attributes}
    free: list[tuple[Predicate, bool]] = []
    for i, view in enumerate(views):
        if view.where is None:
            continue
        expected = i not in outside
        read = set(attributes_of(view.where))
        holder = next(
            (views[j].name for j in ([i] if expected else []) + chosen if read <= set(views[j].attributes)), None
        )
        if holder is not None:
            frame = relations[holder]
            keep = [evaluate(view.where, row) is expected for row in frame.iter_rows(named=True)]
            relations[holder] = frame.filter(pl.Series(keep, dtype=pl.Boolean))
        elif not read & fixed:
            free.append((view.where, expected))
        else:
            # Some attributes fixed, the others free: a row filter when one chosen view holds the fixed ones
            # and the free ones are read by no other selection and are not projected (each row then decides
            # alone whether some value of its free attributes satisfies the selection).
            unfixed = read - fixed
            others = {a for j, other in enumerate(views) if j != i and other.where for a in attributes_of(other.where)}
            holder = next((views[j].name for j in chosen if read & fixed <= set(views[j].attributes)), None)
            if holder is None or unfixed & (others | set(projected)):
                return _NEEDS_CELLS
            frame = relations[holder]
            condition = [(view.where, expected)]
            keep = [
                _project(_Cell({a: row[a] for a in read & fixed}, condition, ()), representatives, "\0n", "\0n")
                is not None
                for row in frame.iter_rows(named=True)
            ]
            relations[holder] = frame.filter(pl.Series(keep, dtype=pl.Boolean))
    if any(frame.is_empty() for frame in relations.values()):
        return None
    if not free:
        return _Pattern(relations, None, None)  # a free attribute no selection reads is unbounded
    # The free attributes' selections hold for every cell of the pattern alike (they read no fixed value):
    # enumerate the representatives of the attributes they read only.
    read = {a for condition, _ in free for a in attributes_of(condition)}
    wanted = [a if a in read else "\0n" for a in projected]
    projection = _project(_Cell({}, free, ()), representatives, *wanted)
    if projection is None:
        return None
    ids, values = (found if a in read else None for a, found in zip(projected, projection, strict=True))
    return _Pattern(relations, ids, values)


def _row(position: int) -> str:
    """The row-number column of the view at ``position`` (a name no attribute can have)."""
    return f"{_ROW}{position}"
