"""One delta join per changed view, shared by the capped sets whose holders' rows join it one to few.

A batch of a view grows every capped set by the join of its new rows with the other views (the delta
rule), one capped elimination per set (:meth:`AssociationCoverCheck._apply`): on BP 24 sets per view and
six views a fold, every run joining the delta through the same five stored views, about 2.5 ms each and
most of the check's update. The runs differ only in the column they keep as the source (a holder's PF)
and the one they keep as the target. Where each holder's rows meet the join one to few, the delta's join
with every view is small: it is built once here, with each such holder's PF column and every attribute
of a pair, and a set's growth is its (PF, target) pairs, distinct, capped at the set's cap.

A view whose rows are many per value of the attributes it shares (BP's v4: some 2,000 rows per (Gender,
CCType)) does not bring its PFs: its sets keep their runs, and in the join it gives at most the cap of
the values of the pair attribute it alone holds per value of the attributes it shares, which answers
"fewer than the cap" exactly for every PF it reaches (the capped-union argument of
:mod:`streamdetect.relational.linked_values`); the other sets read only whether its shared values occur.

Exact: the pairs a set takes are those of its run, up to which of more than its cap values stand for "the
cap or more". Applies when the views with rows are connected by the attributes they share, no attribute
a set reads holds a null (a null leaves a row out of some pairs' joins only), the relations are of codes,
a view without its PFs holds at most one attribute of a pair alone, and the join stays within
``JOIN_ROWS_PER_DELTA_ROW`` rows per delta row; otherwise (None) every set keeps its run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from streamdetect.checks.k_anonymity.kept_relations import PF, with_positions
from streamdetect.relational import code_arrays
from streamdetect.relational.code_arrays import CodeRelation

if TYPE_CHECKING:
    from streamdetect.checks.k_anonymity.association_covers import (
        AssociationCoverCheck,
        AssociationCoverState,
        SetKey,
    )

#: A view brings its PFs to the shared join when it has at most this many rows per value of the
#: attributes it shares (on average): its sets are then answered from the join.
FANOUT = 8
#: The join is given up (every set keeps its run) past this many rows per delta row (and this many rows
#: at least): a join that fans out is what the runs' order of elimination and caps avoid.
JOIN_ROWS_PER_DELTA_ROW = 64
_MIN_LIMIT = 16_384


def _pf(view: str) -> str:
    """The column of a view's PFs in the shared join (a name no attribute can have)."""
    return f"\0pf {view}"


def grown_sets(
    check: AssociationCoverCheck,
    state: AssociationCoverState,
    changed: str,
    rows: tuple[pl.DataFrame, pl.Series],
    *,
    keys: Sequence[tuple[SetKey, int, SetKey | None]],
) -> dict[SetKey, pl.DataFrame] | None:
    """Per set answered by the shared join of ``changed``'s new ``rows`` (and their positions) with the
    other views, the pairs ``[PF, target]`` it gains (capped); None when the join does not apply (module
    docstring). ``keys``: the check's sets (:meth:`AssociationCoverCheck._set_keys`); a twin is left to
    take its twin's set."""
    layout = _Layout.of(check, state)
    if layout is None or changed not in layout.views or not any(key[0] in layout.holders for key, _, _ in keys):
        return None
    relations: dict[str, tuple[pl.DataFrame, CodeRelation]] = {}
    for name in layout.views:
        stored = layout.stored(state, name) if name != changed else None
        if stored is None and name != changed:
            return None
        if stored is not None:
            relations[name] = stored
    delta = layout.delta(changed, *rows)
    joined = (
        None
        if delta is None
        else _join(state, delta, relations, max(_MIN_LIMIT, JOIN_ROWS_PER_DELTA_ROW * delta.height))
    )
    if joined is None:
        return None
    grown: dict[SetKey, pl.DataFrame] = {}
    for key, cap, twin in keys:
        holder, _, _, target = key
        if twin is not None or holder not in layout.holders:
            continue
        if joined.height:
            pairs = code_arrays.unique(joined.select([_pf(holder), target]))
            capped = code_arrays.head_per_key(pairs, [_pf(holder)], cap)
        else:  # (the join stopped at its first empty step: without every column)
            capped = CodeRelation([PF, target], [np.zeros(0, dtype=np.uint32)] * 2, 0)
        grown[key] = CodeRelation([PF, target], capped.arrays, capped.height).to_frame()
    return grown


@dataclass(frozen=True)
class _Layout:
    """The shared join's columns: per view its attributes, those two views share, those of a pair with
    their caps, and the views that bring their PFs (holders)."""

    views: dict[str, list[str]]
    shared: frozenset[str]
    paired: frozenset[str]
    caps: dict[str, int]
    holders: frozenset[str]

    @classmethod
    def of(cls, check: AssociationCoverCheck, state: AssociationCoverState) -> _Layout | None:
        """The layout of the check's views, or None when the join does not apply to them (not connected,
        or a null where a set reads)."""
        views = {view.name: list(view.attributes) for view in check.views}
        counts = Counter(attribute for attributes in views.values() for attribute in attributes)
        shared = frozenset(attribute for attribute, count in counts.items() if count > 1)
        paired = frozenset(attribute for pair in check.pairs for attribute in pair)
        if len(views) < 2 or not _connected(views, shared):
            return None
        for name, attributes in views.items():
            rows = state.seen.rows[name]
            if any(rows.get_column(a).null_count() for a in attributes if a in shared or a in paired):
                return None
        caps = {a: max(check.cap(e, a) for e, s in check.pairs if a in (e, s)) for a in paired}
        holders = frozenset(name for name in views if _fans_out_little(state, name, views[name], shared))
        return cls(views, shared, paired, caps, holders)

    def columns(self, name: str) -> list[str]:
        """A view's columns in the shared join: the attributes it shares, and those of a pair."""
        return [a for a in self.views[name] if a in self.shared or a in self.paired]

    def alone(self, name: str) -> list[str]:
        """The attributes of a pair that the view alone holds."""
        return [a for a in self.columns(name) if a not in self.shared]

    def stored(self, state: AssociationCoverState, name: str) -> tuple[pl.DataFrame, CodeRelation] | None:
        """A stored view's relation in the shared join, with the kept frame it is made from: its present rows
        on its columns with its PFs (a holder), or distinct, capped at the cap of the one pair attribute it
        alone holds per value of the rest (kept with the relation across batches); None when it holds two
        such attributes, or not codes."""
        columns = self.columns(name)
        holder = name in self.holders
        frame = state.kept.relation(state.seen, name, columns, holder)
        alone = self.alone(name)
        if not code_arrays.codes_only(frame) or (len(alone) > 1 and not holder):
            return None
        if holder:
            relation = state.kept.caps.codes(frame)
            return frame, CodeRelation(
                [_pf(name) if c == PF else c for c in relation.columns], relation.arrays, relation.height
            )
        if alone:
            target, cap = alone[0], self.caps[alone[0]]
            capped = state.kept.caps.get(frame, target, cap)
            if capped is None:
                kept = code_arrays.head_positions(
                    state.kept.caps.codes(frame), [c for c in columns if c != target], cap
                )
                capped = frame if kept.size == frame.height else code_arrays.take_rows(frame, kept)
                state.kept.caps.put(frame, target, cap, capped)
            frame = capped
        return frame, state.kept.caps.codes(frame)

    def delta(self, name: str, new: pl.DataFrame, positions: pl.Series) -> CodeRelation | None:
        """The changed view's new rows as a relation of the shared join (as :meth:`stored` makes a stored
        view's: capping the batch's values of a pair attribute it alone holds gives each PF they reach
        either all of them or the cap)."""
        columns = self.columns(name)
        alone = self.alone(name)
        if not code_arrays.codes_only(new, columns):
            return None
        if name in self.holders:
            return CodeRelation.from_frame(with_positions(new, columns, positions.alias(_pf(name))))
        if len(alone) > 1:
            return None
        relation = code_arrays.unique(CodeRelation.from_frame(new.select(columns)))
        if alone:
            relation = code_arrays.head_per_key(relation, [c for c in columns if c != alone[0]], self.caps[alone[0]])
        return relation


def _connected(views: Mapping[str, list[str]], shared: frozenset[str]) -> bool:
    """Whether the views are one component of the graph joining those that share an attribute."""
    names = list(views)
    reached = {names[0]}
    frontier = [names[0]]
    while frontier:
        here = set(views[frontier.pop()]) & shared
        for name in names:
            if name not in reached and here & set(views[name]):
                reached.add(name)
                frontier.append(name)
    return len(reached) == len(names)


def _fans_out_little(state: AssociationCoverState, name: str, attributes: list[str], shared: frozenset[str]) -> bool:
    """Whether ``name``'s present rows are at most :data:`FANOUT` per value of the attributes it shares."""
    on = [a for a in attributes if a in shared]
    rows = state.seen.height(name)
    if not on or rows <= FANOUT:
        return bool(on)
    projection = state.kept.relation(state.seen, name, on, False)
    return rows <= FANOUT * max(projection.height, 1)


def _join(
    state: AssociationCoverState,
    delta: CodeRelation,
    relations: Mapping[str, tuple[pl.DataFrame, CodeRelation]],
    limit: int,
) -> CodeRelation | None:
    """The natural join of ``delta`` with ``relations``, the next relation the one whose join is
    estimated smallest (rows times its rows per value of the columns shared so far, counted once per kept
    frame); None past ``limit`` rows."""
    joined = delta
    left = dict(relations)
    while left and joined.height:
        columns = set(joined.columns)
        best: tuple[float, str] | None = None
        for name, (frame, relation) in left.items():
            on = tuple(c for c in relation.columns if c in columns)
            if not on:
                continue
            estimate = joined.height * relation.height / max(state.kept.caps.distinct(frame, on), 1)
            if best is None or (estimate, name) < best:
                best = (estimate, name)
        if best is None:  # (connected: some relation always shares a column)
            return None
        _, relation = left.pop(best[1])
        joined = code_arrays.join(joined, relation, [c for c in relation.columns if c in columns])
        if joined.height > limit:
            return None
    return joined
