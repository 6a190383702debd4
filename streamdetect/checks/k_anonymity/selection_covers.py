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
reading). Cells are enumerated only where two selections read an attribute no chosen view holds, or no
one chosen view holds the other attributes a selection reads. Recomputed per batch (not maintained
incrementally).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import pairwise, product
from typing import Any

import polars as pl

from streamdetect.checks.findings import AssociationCoverFinding
from streamdetect.checks.k_anonymity.association_covers import minimal_covers
from streamdetect.errors import UnsupportedCase
from streamdetect.model.predicates import (
    Comparison,
    Membership,
    Predicate,
    atoms,
    attributes_of,
    date_literal,
    evaluate,
    is_date,
    literals_of,
    to_polars,
)
from streamdetect.model.topology import ViewDefinition
from streamdetect.relational.linked_values import SharedWork, linked_values


@dataclass(frozen=True)
class Representative:
    """A value standing for itself, or (``unbounded``) for infinitely many values that behave alike."""

    value: Any
    unbounded: bool = False


def representatives(known: set[Any], cap: int) -> list[Representative]:
    """Values covering every region the ``known`` literals split a domain into (module docstring)."""
    return _representatives(known, cap)


def _literals(condition: Predicate, dates: set[str]) -> Iterator[tuple[str, Any]]:
    """The literals of ``condition``, those of the ``dates`` attributes as dates (ISO text, checked when the
    topology was loaded): a date attribute's representatives are then dates, in order."""
    for attribute, value in literals_of(condition):
        yield attribute, date_literal(value) if attribute in dates and isinstance(value, str) else value


def _representatives(known: set[Any], cap: int) -> list[Representative]:
    if known and all(is_date(v) for v in known):
        # Dates are days in order: the integers' regions, by day number.
        days = {v.toordinal() for v in known}
        return [Representative(dt.date.fromordinal(r.value), r.unbounded) for r in _representatives(days, cap)]
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


class _Representatives(Mapping[str, list[Representative]]):
    """Per attribute, the representatives of its values, made when first asked for: a cell asks only for
    the attributes it leaves free (an identifier of 45,000 values held by a view is never one)."""

    def __init__(self, known: Mapping[str, set[Any]], cap: int) -> None:
        self._known, self._cap = known, cap
        self._made: dict[str, list[Representative]] = {}
        self._behaviours: dict[tuple[str, tuple[Predicate, ...]], list[Representative]] = {}

    def __getitem__(self, attribute: str) -> list[Representative]:
        made = self._made.get(attribute)
        if made is None:
            made = self._made[attribute] = _representatives(self._known[attribute], self._cap)
        return made

    def __iter__(self) -> Iterator[str]:
        return iter(self._known)

    def __len__(self) -> int:
        return len(self._known)

    def behaving_apart(self, attribute: str, compared: Sequence[Comparison | Membership]) -> list[Representative]:
        """One representative of ``attribute`` per way the comparisons ``compared`` on it come out (the first), for an
        attribute whose value is not wanted: the constraints hold for one as for any other of the same way."""
        own = tuple(atom for atom in compared if atom.attribute == attribute)
        found = self._behaviours.get((attribute, own))
        if found is None:
            ways: dict[tuple[bool | None, ...], Representative] = {}
            for option in self.get(attribute, _ANY_OTHER):
                ways.setdefault(tuple(evaluate(atom, {attribute: option.value}) for atom in own), option)
            found = self._behaviours[(attribute, own)] = list(ways.values())
        return found


#: An attribute no value of which is known: one value standing for all.
_ANY_OTHER = [Representative("\0any other value", True)]
_FREE = object()  # an attribute a cell leaves free
#: Enumerated cells beyond which the cell procedure refuses (each holds its values and constraints: a few
#: hundred bytes, so about a gigabyte at the limit).
MAX_CELLS = 2_000_000


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
    #: Attributes declared dates (a date no view holds is known by the selections' ISO literals alone).
    dates: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.method not in {"auto", "enumerate", "aggregate"}:
            raise ValueError(f"unknown cell method {self.method!r}: use 'auto', 'enumerate' or 'aggregate'")

    def run(
        self, frames: Mapping[str, pl.DataFrame], table: pl.DataFrame | None = None
    ) -> list[AssociationCoverFinding]:
        """Every minimal cover below k, for every (ID, P) pair held by the views (``table`` unused)."""
        known: dict[str, set[Any]] = {}
        for view in self.views:
            for attribute in view.attributes:
                known.setdefault(attribute, set()).update(frames[view.name].get_column(attribute).unique().to_list())
        dates = set(self.dates) | {
            a for view in self.views for a, dtype in frames[view.name].schema.items() if dtype == pl.Date()
        }
        for view in self.views:
            if view.where is not None:
                for attribute, value in _literals(view.where, dates):
                    known.setdefault(attribute, set()).add(value)
        representatives = _Representatives(known, self.k)
        # The pairs' runs share their work: the same numbered rows, filtered alike, join alike. A PF is a
        # distinct row of its view: numbered once, so that every pattern names it alike.
        shared = SharedWork()
        numbered = {
            view.name: frames[view.name]
            .select(view.attributes)
            .drop_nulls()
            .unique()
            .with_row_index(_row(position), offset=1)
            for position, view in enumerate(self.views)
        }
        cells: list[_Cell] | None = None
        findings: list[AssociationCoverFinding] = []
        for identifier in self.identifiers:
            for sensitive in self.sensitive:
                if identifier not in known or sensitive not in known:
                    continue
                covers = None
                if self.method != "enumerate":
                    given = self._aggregated(numbered, representatives, identifier, sensitive, shared)
                    covers = given.covers(self.k, self.views) if given is not None else None
                if covers is None:
                    if self.method == "aggregate":
                        raise ValueError("the selections need the enumerated cells (method 'enumerate' or 'auto')")
                    if cells is None:
                        rows = {
                            view.name: frames[view.name].select(view.attributes).unique().rows() for view in self.views
                        }
                        cells = list(self._cells(rows))
                    covers = self._covers(*self._enumerated(cells, representatives, identifier, sensitive))
                findings.extend(self._findings(covers, identifier, sensitive))
        return findings

    def _aggregated(
        self,
        numbered: Mapping[str, pl.DataFrame],
        representatives: _Representatives,
        identifier: str,
        sensitive: str,
        shared: SharedWork,
    ) -> _Given | None:
        """Per PF, its identifier and sensitive values over its cells, without enumerating the cells; None
        when a selection needs them (:func:`_pattern_relations`).

        The cells that choose a row in the same views (a *pattern*: which selected views a tuple falls
        outside of) are the natural join of those views' rows, the selections being row filters. A PF's
        values over its cells are then linked values through that join, capped (2 identifier values, k
        sensitive values: all a cover needs), by :func:`~streamdetect.relational.linked_values.linked_values`;
        an attribute no chosen view holds is free, so unbounded. O(2^s) joins for s selected views, each
        about linear in the rows instead of the product of the views.
        """
        given = _Given()
        selected = [i for i, view in enumerate(self.views) if view.where is not None]
        for outside in product([False, True], repeat=len(selected)):
            out = {i for i, o in zip(selected, outside, strict=True) if o}
            patterns = _pattern_relations(
                self.views, numbered, out, representatives, (identifier, sensitive), shared=shared
            )
            if patterns is _NEEDS_CELLS:
                return None
            assert isinstance(patterns, list)
            for pattern in patterns:  # none when no tuple falls in this pattern
                self._pattern_sets(pattern, out, (identifier, sensitive), shared, given)
        return given

    def _pattern_sets(
        self,
        pattern: _Pattern,
        out: set[int],
        pair: tuple[str, str],
        shared: SharedWork,
        given: _Given,
    ) -> None:
        """Add, per PF with a cell in ``pattern``, its identifier and sensitive values there to ``given``."""
        identifier, sensitive = pair
        relations = pattern.relations
        held = {a for frame in relations.values() for a in frame.columns}
        # Only the PF's own view keeps its row numbers (the others' would be joined on); the others are the
        # same frames for every view's PFs, so the runs share the eliminations that do not reach the PFs.
        stripped = {
            name: shared.remember(
                ("stripped", shared.identity(frame)),
                partial(frame.select, [c for c in frame.columns if not c.startswith(_ROW)]),
            )
            for name, frame in relations.items()
        }
        for position, view in enumerate(self.views):
            if position in out:
                continue
            source = _row(position)
            named = {name: relations[name] if name == view.name else frame for name, frame in stripped.items()}
            caps = ((identifier, 2), (sensitive, self.k))
            linked = {a: linked_values(named, source, a, cap, shared) for a, cap in caps if a in held}
            # Every PF with a cell is linked to some value of any attribute the pattern fixes (its own
            # view's, when neither the identifier nor the sensitive attribute is).
            reached = next(iter(linked.values()), None)
            if reached is None:
                reached = linked_values(named, source, view.attributes[0], 1, shared)
            at = pl.lit(position, dtype=pl.Int32).alias(_POS)
            present = reached.select(at, pl.col(source).alias(_NUM)).unique()
            for attribute, part, unbounded, free in (
                (identifier, given.ids, given.ids_unbounded, pattern.free_ids),
                (sensitive, given.values, given.values_unbounded, pattern.free_values),
            ):
                if attribute in linked:
                    part.append(
                        linked[attribute].select(at, pl.col(source).alias(_NUM), pl.col(attribute).alias(_VALUE))
                    )
                elif free is None:  # free and unbounded
                    unbounded.append(present)
                else:  # free: the selections' representatives
                    part.append(present.join(pl.DataFrame({_VALUE: list(free)}), how="cross"))

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
                if len(grown) > MAX_CELLS:
                    raise UnsupportedCase(
                        f"k-anonymity: the selections need the cells enumerated (attributes no view holds are read "
                        f"by more than one selection, or by one whose other attributes no one view holds), and "
                        f"they pass {MAX_CELLS:,} at view {view.name!r}; this version stops there (use views whose "
                        "selections read their own attributes)"
                    )
            cells = grown
        yield from cells

    def _enumerated(
        self,
        cells: Sequence[_Cell],
        representatives: _Representatives,
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
        self, ids: Mapping[tuple[int, int], set[Any]], values: Mapping[tuple[int, int], set[Any]]
    ) -> dict[tuple[Any, frozenset[Any]], set[str]]:
        """The covers below k the PFs give from their identifier and sensitive values, with their views."""
        many = _MANY
        covers: dict[tuple[Any, frozenset[Any]], set[str]] = {}
        for key, found in ids.items():
            linked = values.get(key, set())
            if len(found) == 1 and many not in found and many not in linked and len(linked) < self.k:
                covers.setdefault((next(iter(found)), frozenset(linked)), set()).add(self.views[key[0]].name)
        return covers

    def _findings(
        self, covers: Mapping[tuple[Any, frozenset[Any]], set[str]], identifier: str, sensitive: str
    ) -> list[AssociationCoverFinding]:
        """The minimal covers among ``covers``, as findings."""
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
    cell: _Cell, representatives: _Representatives, identifier: str, sensitive: str
) -> tuple[set[Any] | None, set[Any] | None] | None:
    """The cell's identifier and sensitive values (None: unbounded), or None when the cell is empty."""
    mentioned = {a for predicate, _ in cell.constraints for a in attributes_of(predicate)}
    free = sorted((mentioned | {identifier, sensitive}) - set(cell.fixed))
    # An attribute not projected only has to let the constraints hold: one representative per way its
    # comparisons come out is enough (BP's Zipcode: two for `Zipcode > '5'`, not its 36,000 values).
    compared = [atom for predicate, _ in cell.constraints for atom in atoms(predicate)]
    options = [
        representatives.get(a, _ANY_OTHER)
        if a in {identifier, sensitive}
        else representatives.behaving_apart(a, compared)
        for a in free
    ]
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
    dates = {a for a, v in fixed.items() if is_date(v)}
    for condition in conditions:
        for attribute, value in _literals(condition, dates):
            known.setdefault(attribute, set()).add(value)
    representatives = _Representatives(known, cap)
    cell = _Cell(dict(fixed), [(condition, True) for condition in conditions], ())
    # No projection is wanted: a placeholder attribute stands for both.
    return _project(cell, representatives, "\0none", "\0none") is not None


_MANY = object()  # marks an unbounded projection


@dataclass(frozen=True)
class _Pattern:
    """The cells choosing a row in the same views: the views' rows (filtered), and the values of the
    identifier and sensitive attributes when free (None: unbounded)."""

    relations: dict[str, pl.DataFrame]
    free_ids: Collection[Any] | None
    free_values: Collection[Any] | None


_POS, _NUM, _VALUE, _COUNT = "\0position", "\0number", "\0value", "\0count"


@dataclass
class _Given:
    """What the patterns give each PF (its view's position and its number there): frames of its identifier
    values and of its sensitive values, and of the PFs whose values are unbounded in some pattern."""

    ids: list[pl.DataFrame] = field(default_factory=list)
    values: list[pl.DataFrame] = field(default_factory=list)
    ids_unbounded: list[pl.DataFrame] = field(default_factory=list)
    values_unbounded: list[pl.DataFrame] = field(default_factory=list)

    def covers(self, k: int, views: Sequence[ViewDefinition]) -> dict[tuple[Any, frozenset[Any]], set[str]]:
        """The covers below k the PFs give (one identifier value, fewer than k sensitive ones, neither
        unbounded), with the views giving each: grouped in polars, the unions of the patterns' sets."""
        if not self.ids:
            return {}
        key = [_POS, _NUM]
        ids = (
            pl.concat(self.ids, how="vertical_relaxed")
            .unique()
            .group_by(key)
            .agg(pl.len().alias(_COUNT), pl.col(_VALUE).first())
            .filter(pl.col(_COUNT) == 1)
        )
        for unbounded in (self.ids_unbounded, self.values_unbounded):
            if unbounded:
                ids = ids.join(pl.concat(unbounded).unique(), on=key, how="anti")
        if self.values:
            values = (
                pl.concat(self.values, how="vertical_relaxed")
                .unique()
                .group_by(key)
                .agg(pl.col(_VALUE).alias("\0values"))
            )
            ids = ids.join(values, on=key, how="left").filter(pl.col("\0values").list.len().fill_null(0) < k)
        else:
            ids = ids.with_columns(pl.lit(None).alias("\0values"))
        covers: dict[tuple[Any, frozenset[Any]], set[str]] = {}
        for position, value, linked in ids.select(_POS, _VALUE, "\0values").iter_rows():
            covers.setdefault((value, frozenset(linked or ())), set()).add(views[position].name)
        return covers


_NEEDS_CELLS = object()  # a pattern whose selections the joins cannot express
_UNREAD = object()  # a projected attribute a selection does not bound
_ROW = "\0row"
_CLASS = "\0class"


def _pattern_relations(
    views: Sequence[ViewDefinition],
    frames: Mapping[str, pl.DataFrame],
    outside: set[int],
    representatives: _Representatives,
    projected: tuple[str, str],
    *,
    shared: SharedWork,
) -> list[_Pattern] | object:
    """The chosen views' rows (distinct, numbered) for one pattern, each selection applied as a row filter,
    as one or more parts whose cells are the pattern's (none when the pattern holds no tuple);
    ``_NEEDS_CELLS`` when a selection cannot be a row filter.

    A selection becomes a filter when one chosen view holds every attribute it reads (the natural join
    makes that view's values the tuple's). A selection reading only attributes no chosen view holds
    constrains free attributes only, alike for every cell: the pattern is empty unless those selections
    can hold together, and they bound the identifier's and sensitive attribute's values when free
    (representative values, as for a cell). A selection reading fixed and free attributes, where one chosen
    view holds the fixed ones and no other selection reads the free ones, is a row filter of that view
    (each row decides alone whether some value of its free attributes satisfies it); when the identifier
    or the sensitive attribute is among those free ones, the values it can take depend on the row's fixed
    values, so the view's rows are split into classes that bound them alike, one part per class (a cell
    holds one row of the view: the parts partition the cells). Any other mix needs the cells.
    """
    chosen = [i for i in range(len(views)) if i not in outside]
    if not chosen:
        return []
    relations = {views[i].name: frames[views[i].name] for i in chosen}
    fixed = {a for i in chosen for a in views[i].attributes}
    free: list[tuple[Predicate, bool]] = []
    # Per selection read as a row filter with free attributes: its holder, the column naming each row's
    # class there, and per class the bounds of the projected attributes.
    splits: list[tuple[str, str, list[tuple[Any, Any]]]] = []
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
            relations[holder] = shared.remember(
                ("filter", shared.identity(frame), i, expected), partial(_filtered, frame, view.where, expected)
            )
        elif not read & fixed:
            free.append((view.where, expected))
        else:
            unfixed = read - fixed
            others = {a for j, other in enumerate(views) if j != i and other.where for a in attributes_of(other.where)}
            holder = next((views[j].name for j in chosen if read & fixed <= set(views[j].attributes)), None)
            if holder is None or unfixed & others:
                return _NEEDS_CELLS
            column = f"{_CLASS}{len(splits)}"
            classes, bounds = _classes(
                relations[holder], read & fixed, (view.where, expected), representatives, projected
            )
            relations[holder] = relations[holder].with_columns(classes.alias(column)).drop_nulls(column)
            splits.append((holder, column, bounds))
    if any(frame.is_empty() for frame in relations.values()):
        return []
    free_ids: Collection[Any] | None = None
    free_values: Collection[Any] | None = None
    if free:
        # The free attributes' selections hold for every cell of the pattern alike (they read no fixed
        # value): enumerate the representatives of the attributes they read only.
        read = {a for condition, _ in free for a in attributes_of(condition)}
        wanted = [a if a in read else "\0n" for a in projected]
        projection = _project(_Cell({}, free, ()), representatives, *wanted)
        if projection is None:
            return []
        free_ids, free_values = (found if a in read else None for a, found in zip(projected, projection, strict=True))
    return _parts(relations, splits, free_ids, free_values)


def _parts(
    relations: Mapping[str, pl.DataFrame],
    splits: Sequence[tuple[str, str, list[tuple[Any, Any]]]],
    free_ids: Collection[Any] | None,
    free_values: Collection[Any] | None,
) -> list[_Pattern]:
    """One part of a pattern per choice of a class in every split (the product of a few classes each): the
    split views' rows of those classes, the projected attributes bounded as the classes say."""
    parts = []
    for choice in product(*(range(len(bounds)) for _, _, bounds in splits)):
        part = dict(relations)
        bounded = [free_ids, free_values]
        for (holder, column, bounds), chosen in zip(splits, choice, strict=True):
            part[holder] = part[holder].filter(pl.col(column) == chosen)
            for position, bound in enumerate(bounds[chosen]):
                if bound is not _UNREAD:
                    bounded[position] = bound
        part = {name: _without_classes(frame) for name, frame in part.items()}
        if not any(frame.is_empty() for frame in part.values()):
            parts.append(_Pattern(part, bounded[0], bounded[1]))
    return parts


def _without_classes(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` without its class columns (itself when it has none: its joins are shared by identity)."""
    kept = [c for c in frame.columns if not c.startswith(_CLASS)]
    return frame if len(kept) == frame.width else frame.select(kept)


def _filtered(frame: pl.DataFrame, condition: Predicate, expected: bool) -> pl.DataFrame:
    """The rows of ``frame`` for which ``condition`` is ``expected`` (true, or false; unknown neither)."""
    holds = to_polars(condition, frame.schema)
    return frame.filter(holds if expected else ~holds)


def _classes(
    frame: pl.DataFrame,
    fixed: set[str],
    condition: tuple[Predicate, bool],
    representatives: _Representatives,
    projected: tuple[str, str],
) -> tuple[pl.Series, list[tuple[Any, Any]]]:
    """Per row of ``frame``, the class of its values of the ``fixed`` attributes under ``condition`` (null
    when no value of the others satisfies it), and per class the values the projected attributes the
    condition reads but ``frame`` does not hold can take (None: unbounded; ``_UNREAD`` for the others)."""
    read = set(attributes_of(condition[0]))
    wanted = [a if a in read - fixed else "\0n" for a in projected]
    order = sorted(fixed)
    # The condition reads the fixed values through its atoms on them only: rows whose atoms agree are
    # alike, and one of them stands for all (a few signatures for thousands of distinct rows).
    on_fixed = [atom for atom in atoms(condition[0]) if atom.attribute in fixed]
    signs = [f"\0atom{i}" for i in range(len(on_fixed))] or ["\0none"]
    signed = frame.select(order).with_columns(
        *(to_polars(atom, frame.schema).alias(sign) for atom, sign in zip(on_fixed, signs, strict=False)),
        *([pl.lit(True).alias(signs[0])] if not on_fixed else []),
    )
    bounds: list[tuple[Any, Any]] = []
    index: dict[tuple[Any, Any], int] = {}
    class_of: list[int | None] = []
    alike = signed.unique(subset=signs, keep="first", maintain_order=True)
    for values in alike.select(order).iter_rows():
        projection = _project(_Cell(dict(zip(order, values, strict=True)), [condition], ()), representatives, *wanted)
        if projection is None:
            class_of.append(None)
            continue
        first, second = (
            (frozenset(found) if found is not None else None) if a != "\0n" else _UNREAD
            for a, found in zip(wanted, projection, strict=True)
        )
        bound = (first, second)
        class_of.append(index.setdefault(bound, len(index)))
        if class_of[-1] == len(bounds):
            bounds.append(bound)
    classes = alike.select(signs).with_columns(pl.Series("\0class", class_of, dtype=pl.Int64))
    joined = signed.select(signs).join(classes, on=signs, how="left", nulls_equal=True, maintain_order="left")
    return joined.get_column("\0class"), bounds


def _row(position: int) -> str:
    """The row-number column of the view at ``position`` (a name no attribute can have)."""
    return f"{_ROW}{position}"
