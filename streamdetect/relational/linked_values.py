"""Capped linked values through a natural join, without materialising it.

For relations R_1..R_n, a *source* attribute E and a *target* attribute T, compute for every value e
of E in the join J = R_1 ⋈ ... ⋈ R_n the set L(e) = {t : (e, t) ∈ π_{E,T} J}, capped at k values:
when |L(e)| < k the set is exact, otherwise k of its values stand for "k or more". This is all the
count-equals-one query of Dou & Coulondre (section 3.4) and partial disclosure need.

Method: variable elimination over the join (the message passing of the design notes, section 2, in
the form that also handles cycles). Every attribute other than E and T is existentially quantified
away in turn: the relations holding it are joined and it is projected out. The order is greedy, the
next attribute being the one whose relations join smallest (estimated from distinct counts before
joining; the estimate only orders the work, never changes the result). A relation that is the only
one holding T is capped at k T values per value of its other attributes: a later join with a
relation without T only selects which of its rows take part, so the union of their T sets, capped,
still answers "fewer than k" exactly. When a step joins two or more relations holding T with larger
ones that do not, the holders are joined first and capped per the columns they share with the rest
(the rest only selects rows): a wide fan-out is never built whole before the cap (BP with a selection
on v5: 4.3 GB to 0.9 GB). On an acyclic channel this is the leaf-to-root pass of Yannakakis'
algorithm; on a cyclic one (BP's v1, v3, v4, v5) the capped T sets travel through the
cycle instead of a large bag being built (design notes: "materialise only the smallest bags").

Cost: the sum of the sizes of the joins performed, each of an attribute's relations; with capped T
sets on BP about linear in the input times k.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
import polars as pl

from streamdetect.relational import code_arrays, small_joins
from streamdetect.relational.code_arrays import CodeRelation

K = TypeVar("K")
R = TypeVar("R")
V = TypeVar("V")
#: A flag column marking a grown frame's new rows among the capped ones (a name no attribute can have).
_FRESH = "\0fresh"


#: Chunks an append-only frame (a kept projection, a linked set) may have before it is made contiguous again.
MAX_CHUNKS = 16

#: An elimination run whose smallest relation has at most this many rows runs in numpy (code_arrays): a
#: micro-batch's runs, whose polars queries cost more by their fixed cost than by their rows. Measured on
#: BP's association covers (k-anonymity, eight micro-batches an update): 8,000 rows beat 2,000 by 1.12x in
#: rows/s and moved neither linkage nor the batch check (docs/benchmarks-history.md).
CODE_ARRAYS_ROWS = 8_000

#: A lazy query run by the in-memory engine without optimizations: the eager calls' engine (polars 2.x
#: collects a lazy query with the streaming engine by default, which costs more per small query).
_IN_MEMORY: dict[str, object] = {"engine": "in-memory", "optimizations": pl.QueryOptFlags.none()}


def in_memory(query: pl.LazyFrame) -> pl.DataFrame:
    """Run ``query`` as the eager calls would, in one go: a chain of eager calls is a query each, with its
    fixed cost, which dominates on the few hundred rows of a stream update's frames (measured paired on
    BP: the elimination's join, projection, dedup and cap as one query, 0.85-0.90x the four calls)."""
    return query.collect(**_IN_MEMORY)  # type: ignore[call-overload, no-any-return]


def _head_per_key(query: pl.LazyFrame, keys: list[str], k: int) -> pl.LazyFrame:
    """At most ``k`` rows of ``query`` per value of ``keys`` (k overall without keys)."""
    return query.group_by(keys).head(k) if keys else query.head(k)


def cap_per_key(frame: pl.DataFrame, keys: list[str], k: int) -> pl.DataFrame:
    """Distinct rows of ``frame``, at most ``k`` per value of ``keys`` (k overall without keys). O(n)."""
    return in_memory(_head_per_key(frame.lazy().unique(), keys, k))


def _join_order(frames: list[pl.DataFrame]) -> list[tuple[pl.DataFrame, list[str]]]:
    """The order of a natural join of ``frames``: smallest first, then a frame sharing columns with those
    before it where one does (cross products last); each with the columns it joins on."""
    pending = sorted(frames, key=lambda frame: frame.height)
    first = pending.pop(0)
    order: list[tuple[pl.DataFrame, list[str]]] = [(first, [])]
    columns = set(first.columns)
    while pending:
        linked = [i for i, frame in enumerate(pending) if set(frame.columns) & columns]
        frame = pending.pop(linked[0] if linked else 0)
        order.append((frame, [column for column in frame.columns if column in columns]))
        columns |= set(frame.columns)
    return order


def _join_all(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """Natural join in :func:`_join_order`, each join of a few rows with a large frame cut down first."""
    (joined, _), *rest = _join_order(frames)
    for frame, on in rest:
        joined = small_joins.join(joined, frame, on) if on else joined.join(frame, how="cross")
    return joined


def _join_all_lazy(frames: list[pl.DataFrame]) -> pl.LazyFrame:
    """:func:`_join_all` as one lazy query, for frames none of which is large enough for
    :func:`small_joins.join` to cut down first (:func:`_one_query`)."""
    (first, _), *rest = _join_order(frames)
    joined = first.lazy()
    for frame, on in rest:
        joined = joined.join(frame.lazy(), on=on) if on else joined.join(frame.lazy(), how="cross")
    return joined


def _one_query(frames: Iterable[pl.DataFrame]) -> bool:
    """Whether a join of ``frames`` runs as one lazy query: none is large enough to be cut down first."""
    return all(frame.height < small_joins.LARGE_ROWS for frame in frames)


class SharedWork:
    """Work that the elimination runs of one update share: distinct counts, capped relations and
    eliminated factors, keyed by the identity of their input frames (kept alive here, so an id is
    never reused while the key stands). Channels that share a cycle (BP's v2, v3, v5 in six channels)
    eliminate it once. Scope it to one batch: it holds every frame it has seen.
    """

    def __init__(self, kept: KeptCaps | None = None) -> None:
        self._alive: dict[int, object] = {}
        # Frames as code relations (numpy), both ways: a frame's relation is made once per batch.
        self._codes: dict[int, CodeRelation] = {}
        self._frames: dict[int, pl.DataFrame] = {}
        self.distinct: dict[tuple[object, ...], int] = {}
        self.results: dict[tuple[object, ...], Any] = {}
        self._subsets: dict[tuple[int, str], list[tuple[pl.Series | np.ndarray[Any, Any], pl.DataFrame]]] = {}
        self.kept = kept

    def identity(self, frame: object) -> int:
        self._alive[id(frame)] = frame
        return id(frame)

    def codes(self, frame: pl.DataFrame) -> CodeRelation:
        """``frame`` as a relation of codes, the same object for the same frame in the batch (so the
        eliminations of tasks sharing the frame share their results)."""
        key = self.identity(frame)
        relation = self._codes.get(key)
        if relation is None:
            relation = CodeRelation.from_frame(frame) if self.kept is None else self.kept.codes(frame)
            self._codes[key] = relation
            self._frames[self.identity(relation)] = frame
        return relation

    def frame_of(self, relation: CodeRelation) -> pl.DataFrame | None:
        """The frame a relation of codes was made from (:meth:`codes`), or None for one made in a run."""
        return self._frames.get(id(relation))

    def remember(self, key: tuple[object, ...], compute: Callable[[], R]) -> R:
        if key not in self.results:
            result = compute()
            self.identity(result)
            self.results[key] = result
        found: R = self.results[key]
        return found

    def subset(
        self,
        frame: pl.DataFrame,
        kind: str,
        selector: pl.Series | np.ndarray[Any, Any],
        compute: Callable[[], pl.DataFrame],
    ) -> pl.DataFrame:
        """The subset of ``frame`` that ``selector`` picks, computed once per batch for equal selectors of one
        ``kind`` (a row mask, or the codes kept of one column: never compared with each other, as 0 equals
        False and equal codes of two columns pick different rows): tasks that restrict one relation alike
        then share the joins after it. One kind's selectors are all polars series or all numpy arrays."""
        entries = self._subsets.setdefault((self.identity(frame), kind), [])
        for known, result in entries:
            if isinstance(selector, np.ndarray):
                if np.array_equal(known, selector):
                    return result
            elif known.equals(selector, check_dtypes=True):  # type: ignore[union-attr]
                return result
        result = compute()
        if result.height == frame.height:
            result = frame  # nothing left out: the frame itself, whose joins other tasks share
        self.identity(result)
        entries.append((selector, result))
        return result

    def capped(self, frame: pl.DataFrame, target: str, k: int, compute: Callable[[], pl.DataFrame]) -> pl.DataFrame:
        """``frame`` capped at k values of ``target`` per key: shared in the batch, and across batches (in
        ``kept``) while ``frame`` is the same object (a stored view's projection that did not change)."""
        key = ("cap", self.identity(frame), target, k)
        if key not in self.results and self.kept is not None:
            found = self.kept.get(frame, target, k)
            if found is None:
                found = compute()
                self.kept.put(frame, target, k, found)
            self.identity(found)
            self.results[key] = found
        return self.remember(key, compute)


#: Entries of dead frames a kept dict of frames may hold before they are dropped (:meth:`KeptCaps._sweep`).
_FRAMES_SLACK = 16


class KeptCaps:
    """Capped relations kept across batches, each with a weak reference to its input frame: an entry
    counts only while that very frame is alive (a kept projection is replaced by a new frame when its
    view changes, so a stale entry is never returned); entries of dead frames are dropped as new come."""

    def __init__(self) -> None:
        # Per frame (by id, with a reference telling that very frame), its capped forms by (target, k): a
        # frame's are found without a pass over every frame's (a view batch grows some 40 projections).
        self._entries: dict[int, tuple[weakref.ref[pl.DataFrame], dict[tuple[str, int], pl.DataFrame]]] = {}
        # Per grown frame, by (target, k): the capped form of the frame it grew from, and the rows appended since.
        self._pending: dict[
            int, tuple[weakref.ref[pl.DataFrame], dict[tuple[str, int], tuple[pl.DataFrame, list[pl.DataFrame]]]]
        ] = {}
        self._distinct: dict[tuple[int, tuple[str, ...]], tuple[weakref.ref[pl.DataFrame], int]] = {}
        self._codes: dict[int, tuple[weakref.ref[pl.DataFrame], CodeRelation]] = {}
        # Per dict of entries, its size at which the entries of dead frames are next dropped (:meth:`_sweep`).
        self._sweep_at: dict[str, int] = {}

    def _sweep(self, name: str, slack: int | None = None) -> None:
        """Drop the entries of dead frames from the dict ``name`` once it has doubled since the last time
        (amortised O(1) per entry: most frames live for one batch), where a pass at every new entry made a
        stream update's distinct counts quadratic in the frames kept; or once it has ``slack`` entries more,
        for entries holding frames (capped forms), which a dead frame should not keep for long."""
        entries = getattr(self, name)
        if len(entries) >= self._sweep_at.get(name, 0):
            entries = _alive(entries)
            setattr(self, name, entries)
            self._sweep_at[name] = max(2 * len(entries), 64) if slack is None else len(entries) + slack

    def codes(self, frame: pl.DataFrame) -> CodeRelation:
        """``frame`` as a relation of codes, made once while the frame lives (a stored projection's
        columns are copied out of their chunks once, not by every batch that reads them)."""
        entry = self._codes.get(id(frame))
        if entry is not None and entry[0]() is frame:
            return entry[1]
        return self._keep_codes(frame, CodeRelation.from_frame(frame))

    def _keep_codes(self, frame: pl.DataFrame, relation: CodeRelation) -> CodeRelation:
        self._sweep("_codes")
        self._codes[id(frame)] = (weakref.ref(frame), relation)
        return relation

    def distinct(self, frame: pl.DataFrame, on: tuple[str, ...]) -> int:
        """The number of distinct values of ``on`` in ``frame``, counted once while the frame lives (the
        elimination order's estimates read it: a plan recorded for a new delta size reuses the counts)."""
        key = (id(frame), on)
        entry = self._distinct.get(key)
        if entry is not None and entry[0]() is frame:
            return entry[1]
        if key not in self._distinct:
            self._sweep("_distinct")
        if code_arrays.codes_only(frame):
            count = code_arrays.count_distinct(self.codes(frame), on)
        else:
            count = frame.select(on).n_unique()
        self._distinct[key] = (weakref.ref(frame), count)
        return count

    def get(self, frame: pl.DataFrame, target: str, k: int) -> pl.DataFrame | None:
        """The capped form of ``frame`` if kept, or carried forward from a frame it grew from (:meth:`grown`)."""
        entry = self._entries.get(id(frame))
        if entry is not None and entry[0]() is frame:
            found = entry[1].get((target, k))
            if found is not None:
                return found
        pending = self._pending.get(id(frame))
        if pending is None or pending[0]() is not frame or (target, k) not in pending[1]:
            return None
        capped, appended = pending[1].pop((target, k))
        result = cap_grown(capped, pl.concat(appended), target, k)
        self.put(frame, target, k, result)
        return result

    def put(self, frame: pl.DataFrame, target: str, k: int, result: pl.DataFrame) -> None:
        """Keep ``result`` as the capped form of ``frame``."""
        entry = self._entries.get(id(frame))
        if entry is None or entry[0]() is not frame:
            if entry is None:
                self._sweep("_entries", _FRAMES_SLACK)
            entry = self._entries[id(frame)] = (weakref.ref(frame), {})
        entry[1][(target, k)] = result

    def grown(self, old: pl.DataFrame, fresh: pl.DataFrame) -> pl.DataFrame:
        """``old`` with the rows ``fresh`` appended (rows ``old`` does not hold), as a new frame; the capped
        forms kept of ``old`` are carried forward to it by ``fresh``'s rows (:func:`cap_grown`), O(capped rows
        probed + fresh), where capping it anew groups all its rows (on BP, a batch of v5 made the capped
        forms of v5's and v4's projections anew, 3-9 ms each, 10-15% of the batch).

        When ``old``'s codes are kept (:meth:`codes`), the new frame is a view of them grown by ``fresh``'s
        (appended in place: :meth:`CodeRelation.grown`): a stored projection and its codes then share their
        memory, where it was held twice, in polars' chunks and in the arrays (at 452,220 rows per view,
        some 35 MB of a partition unit's linkage state). Otherwise the frames are concatenated, made
        contiguous now and then (amortised O(1) per row)."""
        if not fresh.height:
            return old
        if fresh.columns != old.columns:
            fresh = fresh.select(old.columns)
        codes = self._codes.get(id(old))
        if codes is not None and codes[0]() is old and code_arrays.codes_only(fresh) and code_arrays.codes_only(old):
            relation = codes[1].grown(CodeRelation.from_frame(fresh))
            new = relation.to_frame()
            self._keep_codes(new, relation)
        else:
            new = appended(old, fresh)
        # Carried when next asked for (:meth:`get`): a view's batch grows its projections, and their capped
        # forms are read by the batches of the other views; a frame grown again before carries the rows.
        carried: dict[tuple[str, int], tuple[pl.DataFrame, list[pl.DataFrame]]] = {}
        pending = self._pending.get(id(old))
        if pending is not None and pending[0]() is old:
            carried.update({tk: (capped, [*since, fresh]) for tk, (capped, since) in pending[1].items()})
        entry = self._entries.get(id(old))
        if entry is not None and entry[0]() is old:
            carried.update({tk: (capped, [fresh]) for tk, capped in entry[1].items()})
        if carried:
            self._sweep("_pending", _FRAMES_SLACK)
            self._pending[id(new)] = (weakref.ref(new), carried)
        return new


def appended(frame: pl.DataFrame, rows: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with ``rows`` appended (the same columns, in the same order, of the same types). Appends
    fragment a frame; it is made contiguous now and then (amortised O(1) per appended row). By ``vstack``:
    ``pl.concat`` of the same two frames cost some 150 us in a stream update (8 us), where a loop of
    them alone takes 10."""
    grown = frame.vstack(rows) if rows.height else frame
    return grown.rechunk() if grown.n_chunks() > MAX_CHUNKS else grown


def cap_grown(capped: pl.DataFrame, fresh: pl.DataFrame, target: str, k: int) -> pl.DataFrame:
    """A capped form (:func:`cap_per_key` on the columns other than ``target``) of a frame grown by the
    rows ``fresh``, from ``capped``, that of the frame before. Exact: a key with k rows in ``capped`` keeps
    them; one with fewer had all its rows there and takes ``fresh``'s rows of that key up to k (the
    earlier rows first). One query: the capped rows of the keys ``fresh`` holds, then ``fresh``, k per
    key."""
    if fresh.is_empty():
        return capped
    fresh = fresh.select(capped.columns)
    keys = [column for column in capped.columns if column != target]
    if not keys:
        added = fresh.head(max(k - capped.height, 0))
    elif fresh.height <= CODE_ARRAYS_ROWS and code_arrays.codes_only(capped) and code_arrays.codes_only(fresh):
        # In numpy, for a batch's few rows: the capped rows cut to the keys ``fresh`` shows (one flag
        # lookup per row), then the fresh rows each key takes after them. The polars query cost 1-1.5 ms
        # for a stored projection's capped form, carried forward once per view batch.
        rows = CodeRelation.from_frame(fresh)
        earlier = code_arrays.rows_with_values(CodeRelation.from_frame(capped), rows, keys)
        added = code_arrays.take_rows(fresh, code_arrays.fresh_heads(earlier, rows, keys, k))
    else:
        added = in_memory(
            pl.concat(
                [
                    capped.lazy()
                    .join(fresh.lazy().select(keys), on=keys, how="semi")
                    .with_columns(pl.lit(False).alias(_FRESH)),
                    fresh.lazy().with_columns(pl.lit(True).alias(_FRESH)),
                ]
            )
            .group_by(keys, maintain_order=True)
            .head(k)
            .filter(pl.col(_FRESH))
            .select(capped.columns)  # a group by puts its keys first: back to the capped form's order
        )
    if added.is_empty():
        return capped
    return pl.concat([capped, added])


def _alive(entries: dict[K, tuple[weakref.ref[pl.DataFrame], V]]) -> dict[K, tuple[weakref.ref[pl.DataFrame], V]]:
    """The entries whose frame is still alive (dropped as new keys come: the dict stays as large as the
    frames the state keeps)."""
    return {key: entry for key, entry in entries.items() if entry[0]() is not None}


@dataclass
class Plan:
    """The order in which one elimination run eliminated its attributes, for runs of the same shape.

    The first run with a plan records the greedy choices (a run that stops early, on an empty factor,
    records as far as it went; the next run to go further extends the plan); later runs replay them
    without estimating costs (the distinct counts behind the estimates cost as much as a small delta's joins). An order
    never changes the result, only the work: a stream update keeps one plan per (task, changed view, order
    of magnitude of the delta), whose relations have the same schemas and like sizes batch after batch.
    """

    order: list[str] = field(default_factory=list)


class _Factor(Protocol):
    """What an elimination run reads of a factor: a polars frame, or a relation of codes in numpy."""

    @property
    def columns(self) -> list[str]: ...
    @property
    def height(self) -> int: ...
    def is_empty(self) -> bool: ...


F = TypeVar("F", bound=_Factor)


class _Elimination(Generic[F]):
    """The factors of one elimination run; the joins, dedups and caps are the subclasses' (polars frames,
    or numpy arrays of codes for runs that start small)."""

    def __init__(
        self,
        relations: Mapping[str, pl.DataFrame],
        source: str,
        target: str,
        k: int,
        shared: SharedWork,
        *,
        plan: Plan | None = None,
    ) -> None:
        self.source, self.target, self.k = source, target, k
        self.relations = relations
        self.shared = shared
        self.plan = plan
        self.position = 0
        self.factors: dict[str, F] = {}
        # A join of relations that lost every attribute is a constant: true when non-empty.
        self.empty = False
        self.created = 0
        # Factors never change until eliminated, and their names are unique: a cost stays valid.
        self.costs: dict[tuple[str, ...], float] = {}
        holders = [name for name, frame in relations.items() if target in frame.columns]
        for name, frame in relations.items():
            # The sole holder of T, capped at k values per key: exact for "fewer than k" (module
            # docstring). Kept across batches while the frame stays the same (a stored projection).
            capped = (
                shared.capped(frame, target, k, partial(_cap_holder, frame, target, k)) if holders == [name] else None
            )
            self.factors[name] = self._admit(frame if capped is None else capped)

    def _admit(self, frame: pl.DataFrame) -> F:
        """An input relation as a factor of this run."""
        raise NotImplementedError

    def _count(self, name: str, on: tuple[str, ...]) -> int:
        """The distinct values of ``on`` in a factor."""
        raise NotImplementedError

    def _eliminate(self, inputs: list[F], keep: list[str], capped: bool) -> F:
        """The join of ``inputs`` projected on ``keep``, distinct, capped at k values of T per key when
        ``capped``."""
        raise NotImplementedError

    def _join_is_empty(self, inputs: list[F]) -> bool:
        raise NotImplementedError

    def _as_frame(self, factor: F) -> pl.DataFrame:
        """A factor as a polars frame."""
        raise NotImplementedError

    def _sole_holder(self, columns: list[str]) -> bool:
        others = [name for name, f in self.factors.items() if self.target in f.columns]
        return self.target in columns and not others

    def _cost(self, holders: list[str]) -> float:
        if len(holders) == 1:
            return 0.0
        key = tuple(holders)
        if key not in self.costs:
            self.costs[key] = self._measure(holders)
        return self.costs[key]

    def _distinct(self, name: str, on: tuple[str, ...]) -> int:
        frame = self.factors[name]
        key = (self.shared.identity(frame), *on)
        if key not in self.shared.distinct:
            self.shared.distinct[key] = frame.height if set(on) == set(frame.columns) else self._count(name, on)
        return self.shared.distinct[key]

    def _measure(self, holders: list[str]) -> float:
        """Estimated rows of joining ``holders``: the textbook |L|·|R| / max(ndv) per join, in order.

        Only the order of elimination depends on it, never the result; distinct counts are cached
        per frame, so a step costs one aggregate per new factor.
        """
        first, *others = sorted(holders, key=lambda name: self.factors[name].height)
        size = float(self.factors[first].height)
        columns = set(self.factors[first].columns)
        for position, name in enumerate(others):
            frame = self.factors[name]
            on = tuple(c for c in frame.columns if c in columns)
            left = self._distinct(first, on) if position == 0 else 1
            size = size * frame.height / max(left, self._distinct(name, on), 1)
            columns |= set(frame.columns)
        return size

    def _choose(self, variables: list[str]) -> str:
        """The planned attribute when a recorded plan has it, else the cheapest by estimate."""
        plan, position = self.plan, self.position
        self.position += 1
        if plan is not None and position < len(plan.order) and plan.order[position] in variables:
            return plan.order[position]
        best: tuple[float, int, str] | None = None
        for variable in variables:
            holders = [name for name, frame in self.factors.items() if variable in frame.columns]
            candidate = (self._cost(holders), len(holders), variable)
            if best is None or candidate < best:
                best = candidate
        assert best is not None
        if plan is not None and position == len(plan.order):
            plan.order.append(best[2])  # the plan grows where no run went before (a run may stop early)
        return best[2]

    def step(self) -> bool:
        """Eliminate the cheapest attribute; False when only E and T remain."""
        variables = sorted(
            {column for frame in self.factors.values() for column in frame.columns} - {self.source, self.target}
        )
        if not variables:
            return False
        variable = self._choose(variables)
        holders = [name for name, frame in self.factors.items() if variable in frame.columns]
        inputs = [self.factors.pop(name) for name in holders]
        rest = {column for frame in self.factors.values() for column in frame.columns}
        joined_columns = list(dict.fromkeys(column for frame in inputs for column in frame.columns))
        keep = [c for c in joined_columns if c != variable and (c in (self.source, self.target) or c in rest)]
        capped = self._sole_holder(keep)

        key = ("eliminate", variable, *sorted(self.shared.identity(f) for f in inputs), *keep, capped, self.k)
        if not keep:  # a component apart from E and T: it only matters whether its join is empty
            self.empty |= self._join_is_empty(inputs)
            return not self.empty
        self.created += 1
        factor = self.shared.remember(key, partial(self._eliminate, inputs, keep, capped))
        self.factors[f"\0{self.created}"] = factor
        if factor.is_empty():
            # The join is empty whatever the other factors hold: stop (about half the runs of a stream
            # update end so, a delta meeting only saturated values).
            self.empty = True
            return False
        return True

    def result(self) -> pl.DataFrame:
        if self.empty:
            return _no_pairs(self.relations.values(), self.source, self.target)
        # The join of what is left on (E, T), capped at k values of T per E value: one more step.
        return self._as_frame(self._eliminate(list(self.factors.values()), [self.source, self.target], True))


def _cap_holder(frame: pl.DataFrame, target: str, k: int) -> pl.DataFrame:
    """``frame`` with at most k values of ``target`` per value of its other columns, the first k of each. A
    batch's few rows of codes are capped in numpy (a polars query cost 0.5 ms: a stream update caps the
    delta of every set whose sole holder of T is the view that changed)."""
    keys = [c for c in frame.columns if c != target]
    if frame.height <= CODE_ARRAYS_ROWS and code_arrays.codes_only(frame):
        kept = code_arrays.head_positions(CodeRelation.from_frame(frame), keys, k)
        return frame if kept.size == frame.height else code_arrays.take_rows(frame, kept)
    return in_memory(_head_per_key(frame.lazy(), keys, k))


def _holders_capped_first(inputs: list[pl.DataFrame], keep: list[str], target: str, k: int) -> list[pl.DataFrame]:
    """``inputs`` with those holding ``target`` (two or more) replaced by their join capped at k target values
    per value of the columns it shares with the others or keeps, when the others are the larger side: they only select
    which of its rows take part, so the capped join answers "fewer than k" exactly (as a sole holder's cap
    does), and a wide fan-out (a view's 45,000 rows meeting a few hundred values per Gender and CCType) is
    never built whole before the cap. Unchanged when the others are smaller (a delta: joined first, it
    keeps the work small)."""
    holders = [frame for frame in inputs if target in frame.columns]
    rest = [frame for frame in inputs if target not in frame.columns]
    if len(holders) < 2 or not rest or min(frame.height for frame in rest) < max(frame.height for frame in holders):
        return inputs  # one holder is capped already (as an input, or as a factor a capped step made)
    others = {column for frame in rest for column in frame.columns} | set(keep)
    joined = _join_all(holders)
    key = [column for column in joined.columns if column != target and column in others]
    return [*rest, cap_per_key(joined.select(*key, target), key, k)]


def _eliminate_frames(inputs: list[pl.DataFrame], keep: list[str], target: str, k: int | None) -> pl.DataFrame:
    """The join of ``inputs`` projected on ``keep``, distinct, with at most ``k`` values of ``target`` per
    key when ``k`` is given, in polars."""
    if k is not None:
        inputs = _holders_capped_first(inputs, keep, target, k)
    if _one_query(inputs):
        # One query for the joins, the projection, the dedup and the cap: each eager call is a
        # query of its own, with its fixed cost (measured paired: 0.85-0.90x of the four calls).
        query = _join_all_lazy(inputs).select(keep).unique()
        return in_memory(query if k is None else _head_per_key(query, [c for c in keep if c != target], k))
    factor = _join_all(inputs).select(keep).unique()
    return factor if k is None else _cap_holder(factor, target, k)


class _FrameElimination(_Elimination[pl.DataFrame]):
    """An elimination run over polars frames."""

    def _admit(self, frame: pl.DataFrame) -> pl.DataFrame:
        return frame

    def _count(self, name: str, on: tuple[str, ...]) -> int:
        frame = self.factors[name]
        if self.shared.kept is not None:
            # A stored view's frame stays the same object across batches: count its values once.
            return self.shared.kept.distinct(frame, on)
        return int(frame.select(on).n_unique())

    def _eliminate(self, inputs: list[pl.DataFrame], keep: list[str], capped: bool) -> pl.DataFrame:
        return _eliminate_frames(inputs, keep, self.target, self.k if capped else None)

    def _join_is_empty(self, inputs: list[pl.DataFrame]) -> bool:
        return _join_all(inputs).is_empty()

    def _as_frame(self, factor: pl.DataFrame) -> pl.DataFrame:
        return factor


class _CodeElimination(_Elimination[CodeRelation]):
    """An elimination run over relations of codes in numpy (:mod:`code_arrays`): the same joins, dedups
    and caps without polars' fixed cost per query, for runs that start from a few rows."""

    def _admit(self, frame: pl.DataFrame) -> CodeRelation:
        return self.shared.codes(frame)

    def _count(self, name: str, on: tuple[str, ...]) -> int:
        relation = self.factors[name]
        frame = self.shared.frame_of(relation)
        if frame is not None and self.shared.kept is not None:
            # An input's count is kept with its frame across batches (a stored projection's).
            return self.shared.kept.distinct(frame, on)
        return relation.n_unique(on)

    def _eliminate(self, inputs: list[CodeRelation], keep: list[str], capped: bool) -> CodeRelation:
        if min(relation.height for relation in inputs) > CODE_ARRAYS_ROWS:
            # A step joining only large relations (a cycle's stored views, or what a delta became after
            # meeting them) goes faster by polars' hash joins than by sorting.
            frames = [self._as_frame(relation) for relation in inputs]
            return self.shared.codes(_eliminate_frames(frames, keep, self.target, self.k if capped else None))
        factor = code_arrays.unique(code_arrays.join_all(inputs).select(keep))
        return code_arrays.head_per_key(factor, [c for c in keep if c != self.target], self.k) if capped else factor

    def _as_frame(self, relation: CodeRelation) -> pl.DataFrame:
        frame = self.shared.frame_of(relation)
        return relation.to_frame() if frame is None else frame

    def _join_is_empty(self, inputs: list[CodeRelation]) -> bool:
        return code_arrays.join_all(inputs).is_empty()


#: Empty ``[source, target]`` frames per (source, target, their types): :func:`_no_pairs` clears one.
_EMPTY_PAIRS: dict[tuple[str, str, pl.DataType, pl.DataType], pl.DataFrame] = {}


def _no_pairs(frames: Iterable[pl.DataFrame], source: str, target: str) -> pl.DataFrame:
    """The empty ``[source, target]`` frame, typed as the last of ``frames`` holding each attribute types it:
    a kept empty frame cleared (under a microsecond; a frame made from a schema cost 25 us, and about half
    the runs of a stream update end with no pairs)."""
    types: dict[str, pl.DataType] = {}
    for frame in frames:
        for column in (source, target):
            if column in frame.columns:
                types[column] = frame.get_column(column).dtype
    key = (source, target, types[source], types[target])
    empty = _EMPTY_PAIRS.get(key)
    if empty is None:
        empty = _EMPTY_PAIRS[key] = pl.DataFrame(schema={source: types[source], target: types[target]})
    return empty.clear()


def linked_values(
    relations: Mapping[str, pl.DataFrame],
    source: str,
    target: str,
    k: int,
    shared: SharedWork | None = None,
    *,
    plan: Plan | None = None,
) -> pl.DataFrame:
    """Frame ``[source, target]``: for each source value in the join, up to ``k`` linked target values.

    ``relations`` must be sets (distinct rows) without nulls whose schema contains ``source`` and
    ``target``; relations not connected to them only matter by being empty or not. Exact for "fewer
    than k or not", and the set itself when fewer than k.
    ``shared`` lets the runs of one batch reuse each other's work (see :class:`SharedWork`); ``plan``
    records the elimination order on a first run and replays it on later ones (see :class:`Plan`).
    """
    if any(frame.is_empty() for frame in relations.values()):
        return _no_pairs(relations.values(), source, target)
    shared = shared if shared is not None else SharedWork()
    frames = relations.values()
    small = min(frame.height for frame in frames) <= CODE_ARRAYS_ROWS
    kind = _CodeElimination if small and all(code_arrays.codes_only(frame) for frame in frames) else _FrameElimination
    elimination: _Elimination[Any] = kind(relations, source, target, k, shared, plan=plan)
    while elimination.step():
        pass
    return elimination.result()
