"""The linkage check: Dou & Coulondre's continuous count-equals-one query, exact and incremental.

Dou & Coulondre 2012 (section 3.4, Fig. 2) run, over the merged stream of every joined view of the
leveled closure, a CEL query that counts per identifier. As printed it never groups by the identifier;
its meaning, implemented here, is: in a channel's joined view, an identifier value E = e linked to
fewer than k distinct values of a sensitive attribute S is disclosed (k = 2: exactly one value, a total
disclosure; larger k: partial). Each disclosed (E, e, S) is reported once, with its minimal channel:
the smallest level where it is disclosed.

State (explicit, serializable, versioned): the distinct rows seen per view, and per (channel, E, S)
the capped linked sets L(e) (at most k values per e). An update takes new rows of one or more views
and applies the delta rule of a join with only arrivals: with every view's new rows stored first, the
join grows by exactly the union of the joins of the new rows of each view v with the rows present of
the others, so L(e) grows by :func:`~streamdetect.relational.linked_values.linked_values` over those
deltas (a join of two deltas is found twice and kept once: the sets are sets). A set that reaches k
stays saturated; the finding is cleared. ``check`` is one update with every row.

Per batch the work follows the batch (docs/design.md, "Delta-proportional linkage updates"): a delta
enters a task as the projected rows its view did not show before; saturated identifier values are left
out of the joins (a mask per task); merges and finding diffs read the sets below k only; elimination
orders are recorded once per (task, view, delta size) and replayed. Those are caches beside the state,
rebuilt after a restore or a withdrawal; the state itself is only the rows and the capped sets.

Only the minimal channel of a disclosure is reported, so a task keeps exact sets only for its *live*
identifier values, those saturated in every sub-channel with no selection to prove (a value disclosed
or absent below can never be reported higher up); a stored set is always a subset of the true one, and
equal to it while the value is live. Values becoming live are caught up whole, and values a step
saturates are settled from the top down (:meth:`LinkageCheck._inherit`). docs/design.md gives the proof.

Null is not a value: a row with a null in an attribute a channel uses drops out of that channel.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property, partial

import numpy as np
import polars as pl

from streamdetect.checks.certainty import IdentifierFacts, SelectionProof
from streamdetect.checks.findings import Delta, LinkageFinding, diff
from streamdetect.checks.linkage_state import (
    CodeFlags,
    Flags,
    KeptProjection,
    LinkageState,
    TaskKey,
    TaskSets,
    Unsaturated,
    rows_where,
    where,
)
from streamdetect.checks.protocol import CheckProperties, CheckSummary, ProgressFactory
from streamdetect.model.batch import Batch
from streamdetect.model.predicates import Predicate
from streamdetect.model.topology import Topology, ViewDefinition
from streamdetect.relational import channel_lattice as lattice
from streamdetect.relational import code_arrays, small_joins
from streamdetect.relational.closure import Channel, channels_by_level
from streamdetect.relational.code_arrays import CodeRelation
from streamdetect.relational.dictionary import CODE, decode, decode_frame
from streamdetect.relational.linked_values import Plan, SharedWork, cap_per_key, in_memory, linked_values

Progress = Callable[[int, int], None]
#: An update adding at least 1/_BULK of the rows stored is a bulk load: it warms the caches (LinkageCheck.warm).
_BULK = 4
#: Chunks an append-only frame (linked set, projection) may have before it is made contiguous again.
_MAX_CHUNKS = 16
#: A task whose step adds to several of its views computes the whole sets of the codes it can change
#: (live ones, or unsaturated ones) instead of one delta join per view, when they are at most this many.
_FEW_CODES = 64


def _record(saturated_now: dict[TaskKey, pl.Series], key: TaskKey, codes: pl.Series) -> None:
    """Note codes a step saturated in a task (a task may saturate codes more than once in a step)."""
    earlier = saturated_now.get(key)
    saturated_now[key] = codes if earlier is None else pl.concat([earlier, codes])


def _appended(frame: pl.DataFrame, rows: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with ``rows`` appended. Appends fragment a frame; it is made contiguous now and then
    (amortised O(1) per appended row)."""
    grown = pl.concat([frame, rows], rechunk=False) if rows.height else frame
    return grown.rechunk() if grown.n_chunks() > _MAX_CHUNKS else grown


def _distinct_codes(rows: pl.DataFrame, keep: list[str]) -> pl.DataFrame:
    """The distinct rows of ``rows`` (dictionary codes) projected on ``keep``, rows with a null left out:
    in numpy (a polars dedup of a micro-batch's rows is a query of 0.3-0.4 ms)."""
    projected = rows.select(keep)
    if any(column.has_nulls() for column in projected.iter_columns()):
        projected = projected.drop_nulls()
    return code_arrays.unique(CodeRelation.from_frame(projected)).to_frame()


def _all_present(version: tuple[int, int, int]) -> bool:
    """Whether a view's version (stored, present, events) has every stored row present."""
    return version[0] == version[1]


def _having(frame: pl.DataFrame, column: str, codes: pl.Series) -> pl.DataFrame:
    """``frame``'s rows whose ``column`` (codes, no nulls) holds one of ``codes``: a flag per code read for
    every row (numpy), then the rows picked (:func:`rows_where`: a gather when few); from
    ``small_joins.LARGE_ROWS`` rows, polars' filter."""
    if frame.height >= small_joins.LARGE_ROWS:
        return frame.filter(pl.col(column).is_in(codes.implode()))  # no copy of a chunked column
    values = frame.get_column(column).to_numpy()
    wanted = codes.to_numpy()
    flags = np.zeros(max(int(values.max()) if values.size else 0, int(wanted.max()) if wanted.size else 0) + 1, bool)
    flags[wanted] = True
    return rows_where(frame, flags[values])


def _same_reads(earlier: tuple[tuple[CodeFlags, int], ...], now: tuple[tuple[CodeFlags, int], ...]) -> bool:
    """Whether two reads of masks are of the same mask objects at the same versions."""
    return len(earlier) == len(now) and all(a is b and va == vb for (a, va), (b, vb) in zip(earlier, now, strict=True))


def _sort_key(value: object) -> tuple[str, str]:
    # Values of one column share a type; the type name only keeps mixed test data comparable.
    return (type(value).__name__, str(value) if not isinstance(value, (int, float)) else f"{value:020.6f}")


def finding_order(finding: LinkageFinding) -> tuple[object, ...]:
    """Report order: by minimal level, channel, attributes, then value."""
    return (
        finding.level,
        finding.views,
        finding.identifier_attribute,
        finding.sensitive_attribute,
        str(finding.identifier_value),
    )


@dataclass(frozen=True)
class LinkageTask:
    """One (channel, identifier attribute, sensitive attribute) whose linked sets the state keeps."""

    channel: Channel
    identifier: str
    sensitive: str

    @property
    def key(self) -> TaskKey:
        return (self.channel.views, self.identifier, self.sensitive)


@dataclass
class _Arrivals:
    """One view's rows entering a batch's joins: rows that became present (``before``: the view's version
    before they did) or withdrawn rows (``before`` None); their projections per attribute set, once."""

    view: str
    rows: pl.DataFrame
    before: tuple[int, int, int] | None
    projected: dict[tuple[str, ...], pl.DataFrame] = field(default_factory=dict)


@dataclass
class _Step:
    """The rows one update adds, per view, all stored before any join runs: each view's delta joins the
    rows present of the others *after* the step, so a join of two deltas is found once per delta and kept
    once (the sets are sets). Tasks then take the step one at a time, by level, each with every delta
    its channel holds: one catch-up, one fold and one settling per task and step, not per view."""

    arrivals: dict[str, _Arrivals]
    #: Per identifier attribute, its dictionary's size before the step: codes from there on are values
    #: first seen in it (no earlier row holds them).
    first_new: dict[str, int]


@dataclass(frozen=True)
class LinkageCheck:
    """Configuration of the linkage check over a set of views; stateless, the state is separate.

    ``max_level`` bounds the closure (None: every level). ``few_codes``: how many codes a task may keep
    open and still take a step that adds to several of its views as one whole-set run
    (:meth:`_few_codes`; 0: always one delta join per view). Only the work depends on it.
    """

    views: tuple[ViewDefinition, ...]
    identifiers: tuple[str, ...]
    sensitive: tuple[str, ...]
    attribute_order: tuple[str, ...]
    k: int = 2
    max_level: int | None = None
    few_codes: int = _FEW_CODES

    @classmethod
    def from_topology(cls, topology: Topology, k: int | None = None, max_level: int | None = None) -> LinkageCheck:
        """The check as the topology configures it; ``k`` overrides the configured threshold."""
        threshold = topology.threshold("linkage", k)
        return cls(
            views=topology.views,
            identifiers=topology.table.identifiers,
            sensitive=topology.table.sensitive,
            attribute_order=topology.table.attributes,
            k=threshold,
            max_level=max_level,
        )

    @cached_property
    def levels(self) -> list[list[Channel]]:
        """The leveled closure of the views."""
        return channels_by_level(self.views, self.attribute_order, self.max_level)

    @cached_property
    def tasks(self) -> tuple[LinkageTask, ...]:
        """Every (channel, E, S) with both attributes in the channel's schema, by level."""
        return tuple(
            LinkageTask(channel, identifier, sensitive)
            for level in self.levels
            for channel in level
            for identifier in self.identifiers
            if identifier in channel.attributes
            for sensitive in self.sensitive
            if sensitive in channel.attributes
        )

    @cached_property
    def _proof(self) -> SelectionProof:
        return SelectionProof(self.views)

    @cached_property
    def _open_selections(self) -> dict[TaskKey, tuple[Predicate, ...]]:
        """Per task, the selections a value's facts must prove for the link to be certain (certainty.py)."""
        return {task.key: self._proof.open_selections(task.channel.views, task.identifier) for task in self.tasks}

    @cached_property
    def _proving(self) -> tuple[str, ...]:
        """The identifiers some of whose tasks have selections to prove (certainty.py)."""
        return tuple(
            e for e in self.identifiers if any(self._open_selections[t.key] for t in self.tasks if t.identifier == e)
        )

    @cached_property
    def _dominating(self) -> dict[TaskKey, tuple[TaskKey, ...]]:
        """Per task, the sub-tasks that decide which identifier values it must keep exact sets for.

        For a channel C' whose views are a proper subset of C's, the join over C projects into the join
        over C', so L_C(e) is a subset of L_C'(e). If e is not saturated in C' it is either absent there (and
        in C) or disclosed there, at a lower level; when C' has no selection to prove, that finding is
        certain and C can never be e's reported channel. So C needs exact sets only for the values
        saturated in every such C' (the *live* values); the maximal such C' suffice (saturated in C'
        implies saturated in every channel under it). Channels whose links need selections proven are
        left out: a higher channel may be the certain one there. O(tasks^2), once.
        """
        keys = [task.key for task in self.tasks]
        return lattice.dominating(keys, lambda key: not self._open_selections[key])

    @cached_property
    def _above(self) -> dict[TaskKey, tuple[TaskKey, ...]]:
        """Per task, the tasks of the same (E, S) over a proper superset of its views, by level."""
        return lattice.above([task.key for task in self.tasks])

    @cached_property
    def _tops(self) -> dict[TaskKey, tuple[TaskKey, ...]]:
        """Per task, the maximal tasks of :attr:`_above` (BP: the channel of all six views)."""
        return lattice.tops(self._above)

    @cached_property
    def _joined_on(self) -> dict[tuple[str, ...], tuple[str, ...]]:
        """Per channel, the attributes its natural join matches on (held by two or more of its views)."""
        attributes = {view.name: view.attributes for view in self.views}
        joined = {}
        for level in self.levels:
            for channel in level:
                counts: dict[str, int] = {}
                for name in channel.views:
                    for attribute in attributes[name]:
                        counts[attribute] = counts.get(attribute, 0) + 1
                joined[channel.views] = tuple(a for a in self.attribute_order if counts.get(a, 0) > 1)
        return joined

    def initialize(self) -> LinkageState:
        """An empty state: no rows seen."""
        return LinkageState()

    def _needed(self, task: LinkageTask) -> dict[str, list[str]]:
        """Per view of the channel, the attributes the join needs: E, S and the join attributes."""
        members = [view for view in self.views if view.name in task.channel.views]
        keep = {task.identifier, task.sensitive, *self._joined_on[task.channel.views]}
        return {view.name: [a for a in view.attributes if a in keep] for view in members}

    def update(
        self,
        state: LinkageState,
        batch: Mapping[str, pl.DataFrame],
        progress: Progress | None = None,
        retracted: Mapping[str, pl.DataFrame] | None = None,
    ) -> Delta[LinkageFinding]:
        """Withdraw ``retracted`` rows, then add new rows of one or more views; return the findings raised
        and cleared.

        Exact. Additions: every view's rows stored first, then for each task whose channel holds a view
        added to, one capped join of each such view's new rows with the rows present of the other views
        (:class:`_Step`), O(sum of sizes * k) plus cycle bags. Withdrawals
        (:meth:`_withdraw`): the identifier values the withdrawn rows reach are found by the same join,
        and their capped sets recomputed from the rows still present, for those values only.
        """
        if state.open is None:
            state.open = {finding.subject: finding for finding in self.result(state)} if state.linked else {}
        attributes = {view.name: list(view.attributes) for view in self.views}
        pending = [(name, frame) for name, frame in batch.items()]
        withdrawn = [(name, frame) for name, frame in (retracted or {}).items() if frame.height]
        unknown = [name for name, _ in [*pending, *withdrawn] if name not in attributes]
        if unknown:
            raise KeyError(f"unknown view {unknown[0]!r}")
        # Identifier codes whose findings may change: those a delta linked to new values, those with
        # new rows in a view holding them (the facts that prove certainty), and those a withdrawal reached.
        # Nothing else can change.
        touched: dict[str, list[pl.Series]] = {}
        if withdrawn:
            self._withdraw(state, withdrawn, attributes, touched)
        sizes = {e: state.seen.dictionaries[e].len() if e in state.seen.dictionaries else 0 for e in self.identifiers}
        arrived: dict[str, _Arrivals] = {}
        for name, frame in pending:
            before = self._version(state, name)
            new, _ = state.seen.add(name, frame, attributes[name])
            for identifier in self._proving:
                # New rows holding a value are facts that may prove its links (only where some channel
                # has selections to prove; otherwise a value's findings change only if its sets do).
                if identifier in new.columns and new.height:
                    touched.setdefault(identifier, []).append(new.get_column(identifier))
            if new.height:
                arrived[name] = _Arrivals(name, new, before)
        if arrived:
            self._add(state, _Step(arrived, sizes), touched, progress)
        codes = {identifier: pl.concat(parts).drop_nulls().unique() for identifier, parts in touched.items()}
        delta = self._diff_touched(state, state.open, codes)
        if sum(frame.height for frame in batch.values()) * _BULK >= state.seen.total():
            self.warm(state)
        return delta

    def warm(self, state: LinkageState) -> None:
        """Build what later micro-batches read and would otherwise build on first use: every view's kept
        projections for every task, every task's split sets and saturation mask, the value index.

        O(state), so done only where that is the order of the step's own work: after a bulk load (an update
        whose rows are at least 1/``_BULK`` of the rows stored) and after a restore. Changes no result.
        """
        state.seen.index_values()
        for task in self.tasks:
            for view, keep in self._needed(task).items():
                self._projection(state, view, keep)
            sets = self._sets(state, task.key)
            if sets is not None:
                self._mask(state, sets, task.identifier)
                self._holding(state, sets, task.identifier)

    def _add(
        self, state: LinkageState, step: _Step, touched: dict[str, list[pl.Series]], progress: Progress | None
    ) -> None:
        """Fold the step's arrived rows into the tasks holding one of their views, by level."""
        tasks = [task for task in self.tasks if any(view in task.channel.views for view in step.arrivals)]
        shared = SharedWork(state.caps)
        # Restrictions of projections no longer kept (their view grew or was rebuilt) can never be read
        # again: dropped, so the cache holds at most one restriction per (task, view) of current frames.
        current = {id(kept.frame) for kept in state.projections.values()}
        state.live_rows = {key: entry for key, entry in state.live_rows.items() if id(entry[0]) in current}
        # Per task, the identifier codes whose sets these rows saturated (tasks go by level, so a task's
        # dominating sub-tasks are done before it: see _apply).
        saturated_now: dict[TaskKey, pl.Series] = {}
        # Per top task, the codes whose whole sets it computed in this step (_inherit).
        probed: dict[TaskKey, pl.Series] = {}
        for position, task in enumerate(tasks):
            earlier = saturated_now.get(task.key)
            found = self._apply(state, task=task, step=step, shared=shared, saturated_now=saturated_now)
            if found is not None:
                touched.setdefault(task.identifier, []).append(found.get_column(task.identifier))
            now = saturated_now.get(task.key)
            if now is not None and now is not earlier and self._tops[task.key]:
                # Only the codes the task's own joins saturated: those settled from a top were probed there.
                own = now if earlier is None else now.slice(earlier.len())
                for grown in self._inherit(
                    state, task, own, step=step, saturated_now=saturated_now, probed=probed, shared=shared
                ):
                    touched.setdefault(task.identifier, []).append(grown)
            if progress is not None:
                progress(position + 1, len(tasks))

    def _withdraw(
        self,
        state: LinkageState,
        withdrawn: list[tuple[str, pl.DataFrame]],
        attributes: Mapping[str, list[str]],
        touched: dict[str, list[pl.Series]],
    ) -> None:
        """Withdraw rows; recompute, exactly, the capped sets of the identifier values they reach.

        A row that is no longer present (its last occurrence withdrawn) can only take values out of the
        sets of the identifier values its join rows hold: those are found by joining it with the rows
        present (before the other views' withdrawals of this batch, a superset). When the row's view holds
        the sensitive attribute, its join rows hold its own sensitive value, so only the sets holding one of
        the withdrawn values can lose one; the others keep every value's support. The sets reached are then
        recomputed from the rows present, with the views holding the identifier restricted to the reached
        values first, so the work follows what the withdrawal reaches, not the state.
        """
        reached: dict[TaskKey, list[pl.Series]] = {}
        for name, frame in withdrawn:
            gone, _ = state.seen.retract(name, frame, attributes[name])
            if not gone.height:
                continue  # every withdrawn row still occurs: nothing changes
            for identifier in self.identifiers:
                if identifier in gone.columns:
                    touched.setdefault(identifier, []).append(gone.get_column(identifier))
            withdrawn_rows = _Arrivals(name, gone, None)
            shared = SharedWork()
            for task in self.tasks:
                if name not in task.channel.views or task.key not in state.linked:
                    continue
                if task.identifier in gone.columns:
                    # The join rows of a withdrawn row hold its own identifier value: no join needed.
                    ids = gone.get_column(task.identifier).drop_nulls().unique()
                else:
                    relations = self._relations(state, task, withdrawn_rows)
                    if relations is None:
                        continue
                    size = relations[name].height.bit_length() // 2
                    others = [relation for view, relation in relations.items() if view != name]
                    plan = self._plan(state, task.key, f"\0reach {name}", size, others)
                    joined = linked_values(relations, task.identifier, task.sensitive, 1, shared, plan=plan)
                    ids = joined.get_column(task.identifier)
                if not ids.len():
                    continue
                hit = state.linked[task.key].filter(pl.col(task.identifier).is_in(ids.implode()))
                if task.sensitive in gone.columns:
                    # The join rows of a withdrawn row hold its own sensitive value: a capped set holding none
                    # of the withdrawn values kept the support of every value it holds, so it stays exact.
                    hit = hit.filter(pl.col(task.sensitive).is_in(gone.get_column(task.sensitive).implode()))
                if hit.height:
                    reached.setdefault(task.key, []).append(hit.get_column(task.identifier))
        self._recompute(state, reached, touched)

    def _recompute(
        self, state: LinkageState, reached: Mapping[TaskKey, list[pl.Series]], touched: dict[str, list[pl.Series]]
    ) -> None:
        """Recompute the capped sets of the identifier values reached, per task, from the rows present.

        By level, so that a task's dominating sub-tasks are exact first: a reached value that is no longer
        live in a task (:attr:`_dominating`) loses its pairs there instead of being recomputed (its set
        cannot decide a report; an empty stored set is a subset of the true one).
        """
        # Views without the identifier enter every task as their kept projections: shared, with their
        # eliminations; those holding it are restricted to the values reached.
        shared = SharedWork()
        for task in self.tasks:
            parts = reached.get(task.key)
            if not parts:
                continue
            key = task.key
            codes = pl.concat(parts).unique()
            touched.setdefault(task.identifier, []).append(codes)
            linked = state.linked[key]
            kept = linked.filter(~pl.col(task.identifier).is_in(codes.implode()))
            live = codes
            if self._dominating[key]:
                mask = self._live(state, task, None)
                live = where(codes, mask) if mask is not None else codes.clear()
            # The task has linked sets, so every view of its channel published: the frame has the pairs'
            # columns.
            again = self._whole_sets(state, task, live, shared).select(kept.columns)
            state.linked[key] = pl.concat([kept, again]).rechunk()
            state.sets.pop(key, None)
            # The pieces: drop the codes' pairs, then append; pairs journaled before are dropped the same way.
            state.unlinked.setdefault(key, []).append(codes)
            dropped = ~pl.col(task.identifier).is_in(codes.implode())
            state.journal[key] = [frame.filter(dropped) for frame in state.journal.get(key, [])] + [again]

    def _diff_touched(
        self,
        state: LinkageState,
        open_findings: dict[tuple[object, ...], LinkageFinding],
        codes: Mapping[str, pl.Series],
    ) -> Delta[LinkageFinding]:
        """Recompute the findings of the touched identifier codes only; diff them with the open ones."""
        after = self.result(state, only=codes)
        touched_values = {
            identifier: set(decode(state.seen.dictionaries, identifier, values.to_list()))
            for identifier, values in codes.items()
        }
        # The open findings of the touched values, looked up by subject (not a scan of every open finding).
        before = [
            finding
            for identifier, values in touched_values.items()
            for value in values
            for sensitive in self.sensitive
            if (finding := open_findings.get((LinkageFinding.check, identifier, value, sensitive))) is not None
        ]
        # A finding equal field by field to the open one says the same (so has its id): kept as it is,
        # without hashing its JSON form. Most findings of the touched values are unchanged.
        unchanged = {finding.subject for finding in after if open_findings.get(finding.subject) == finding}
        if unchanged:
            before = [finding for finding in before if finding.subject not in unchanged]
            after = [finding for finding in after if finding.subject not in unchanged]
        delta = diff(before, after)
        for finding in before:
            del open_findings[finding.subject]
        for finding in after:
            open_findings[finding.subject] = finding
        return delta

    def _relations(
        self, state: LinkageState, task: LinkageTask, delta: _Arrivals, step: _Step | None = None
    ) -> dict[str, pl.DataFrame] | None:
        """The channel's relations for a delta join: the delta's rows for its view, the rows present for the
        others, each projected on what the task needs (None when one is empty: the join is)."""
        relations: dict[str, pl.DataFrame] = {}
        for view, keep in self._needed(task).items():
            if view == delta.view:
                relation: pl.DataFrame | None = self._delta_projection(state, delta, keep)
            else:
                relation = self._current(state, view, keep, step)
            if relation is None or relation.is_empty():
                return None
            relations[view] = relation
        return relations

    def _delta_projection(self, state: LinkageState, delta: _Arrivals, keep: list[str]) -> pl.DataFrame:
        """The delta's rows projected on ``keep``, once per batch for every task that needs them. For rows
        that arrived, only the projected rows the view did not show before: the join is of sets, so a
        projected row already there adds no join row, and a batch whose rows show nothing new on what a
        task reads (a new password of a gender and card type both known) costs that task nothing. The
        view's kept projection grows by them (O(batch) plus one hash probe, not a new projection)."""
        key = tuple(keep)
        if key not in delta.projected:
            stored = state.projections.get((delta.view, key))
            growing = delta.before is not None and stored is not None and stored.version == delta.before
            whole = keep == delta.rows.columns  # every attribute of the view
            # On every attribute of the view the projection is the view's distinct rows present, and rows
            # that became present were not (a withdrawn row left the projection when it went): none is
            # shown already, no probe needed (a third of a delta's projections on BP).
            fresh = delta.rows.drop_nulls() if growing and whole else _distinct_codes(delta.rows, keep)
            if growing:
                assert stored is not None
                fresh = self._grow(state, delta.view, stored, fresh, shown_before=not whole)
            delta.projected[key] = fresh
        return delta.projected[key]

    def _grow(
        self, state: LinkageState, view: str, stored: KeptProjection, fresh: pl.DataFrame, *, shown_before: bool
    ) -> pl.DataFrame:
        """Grow a kept projection by ``fresh`` (distinct projected rows of rows that became present) to
        the view's current version; the rows it did not show before (with ``shown_before``: those it
        showed are left out). Its capped forms and its build number carry forward."""
        if shown_before and stored.frame.height and fresh.height:
            # The fresh rows the stored projection shows already, in numpy over the codes (its arrays
            # kept while it lives): 0.2 ms where polars' semi and anti joins took 0.9.
            shown = code_arrays.shown(CodeRelation.from_frame(fresh), state.caps.codes(stored.frame), fresh.columns)
            fresh = rows_where(fresh, ~shown)
        grown = _appended(stored.frame, fresh)
        state.caps.grown(stored.frame, grown, fresh)
        key = tuple(stored.frame.columns)
        state.projections[(view, key)] = KeptProjection(self._version(state, view), grown, stored.build)
        return fresh

    @staticmethod
    def _version(state: LinkageState, view: str) -> tuple[int, int, int]:
        """What identifies the rows present of ``view``: distinct rows stored, present, count events."""
        seen = state.seen
        rows = seen.rows.get(view)
        return (0, 0, 0) if rows is None else (rows.height, seen.height(view), seen.logged.get(view, 0))

    def _current(self, state: LinkageState, view: str, keep: list[str], step: _Step | None) -> pl.DataFrame | None:
        """:meth:`_projection` of the rows present; a view the step adds to has its kept projection grown by
        its arrived rows first (as its delta joins do), rather than rebuilt from every row."""
        arrivals = step.arrivals.get(view) if step is not None else None
        if arrivals is not None:
            self._delta_projection(state, arrivals, keep)
        return self._projection(state, view, keep)

    def _projection(self, state: LinkageState, view: str, keep: list[str]) -> pl.DataFrame | None:
        """The distinct rows present of ``view`` on ``keep``, kept across batches (a micro-batch changes one
        view: the others' projections are reused; the changed view's grow, :meth:`_delta_projection`)."""
        seen = state.seen
        if view not in seen.rows:
            return None  # nothing published yet
        version = self._version(state, view)
        cached = state.projections.get((view, tuple(keep)))
        if cached is not None and cached.version == version:
            return cached.frame
        if cached is not None and _all_present(cached.version) and _all_present(version):
            # Every row present then and now (stored rows are append-only): the projection grows by the
            # rows stored since, O(those rows), where a rebuild reads the whole view (2-3 ms at 45k: a
            # view's batch leaves the projections no task of the batch read to be rebuilt on next use).
            since = _distinct_codes(seen.rows[view].slice(cached.version[0]), keep)
            self._grow(state, view, cached, since, shown_before=True)
            return state.projections[(view, tuple(keep))].frame
        rows = seen.present(view)
        assert rows is not None
        frame = in_memory(rows.lazy().select(keep).drop_nulls().unique())
        state.builds += 1
        state.projections[(view, tuple(keep))] = KeptProjection(version, frame, state.builds)
        return frame

    def _apply(
        self,
        state: LinkageState,
        *,
        task: LinkageTask,
        step: _Step,
        shared: SharedWork,
        saturated_now: dict[TaskKey, pl.Series],
    ) -> pl.DataFrame | None:
        """Fold the joins of the step's arrived rows (every view of the channel the step adds to) into the
        task's capped sets; the pairs added, whose identifier codes are those whose capped set grew (None
        when nothing did). Codes it saturates go to ``saturated_now``."""
        identifier, sensitive = task.identifier, task.sensitive
        sets = self._sets(state, task.key)
        founds: list[pl.DataFrame] = []
        live: Flags | None = None
        if self._dominating[task.key]:
            live = self._live(state, task, sets)
            if live is None:
                return None  # no value can be live: every one is absent or disclosed below
        few = self._few_codes(state, task, sets, live, step)
        if few is not None:
            found = self._whole_sets(state, task, few, shared, step=step)
            return None if found.is_empty() else self._fold(state, task, sets, found, saturated_now, whole=True)
        if live is not None:
            caught = self._newly_live(task, live, saturated_now, step.first_new[identifier])
            if caught is not None:
                live = live.copy()  # the cached array is shared (_live)
                live[caught.to_numpy()] = False  # their sets are computed whole: not again from the deltas
                founds.append(self._whole_sets(state, task, caught, shared, step=step))
        for arrivals in step.arrivals.values():
            if arrivals.view not in task.channel.views:
                continue
            relations = self._relations(state, task, arrivals, step)
            if relations is None:
                continue
            if live is not None:
                relations = self._live_relations(state, task, relations, delta=arrivals.view, live=live, shared=shared)
            elif sets is not None and sets.saturated.height:
                relations = {
                    view: self._unsaturated(state, sets, identifier, view, relation, delta=view == arrivals.view)
                    if identifier in relation.columns
                    else relation
                    for view, relation in relations.items()
                }
            if relations is None:
                continue
            # The best order depends on the delta's size against the views' (a first load joins whole
            # views, a micro-batch a few rows): one plan per order of magnitude of the delta (factors of 4).
            size = relations[arrivals.view].height.bit_length() // 2
            others = [relation for view, relation in relations.items() if view != arrivals.view]
            plan = self._plan(state, task.key, arrivals.view, size, others)
            founds.append(linked_values(relations, identifier, sensitive, self.k, shared, plan=plan))
        founds = [frame for frame in founds if not frame.is_empty()]
        if not founds:
            return None
        # Caught-up codes are left out of the deltas' joins, so those are disjoint from the catch-up; two
        # deltas' joins may share pairs (a join of both deltas): capped again, as _fold takes at most k
        # distinct pairs per code.
        found = founds[0] if len(founds) == 1 else cap_per_key(pl.concat(founds), [identifier], self.k)
        return self._fold(state, task, sets, found, saturated_now)

    def _few_codes(
        self, state: LinkageState, task: LinkageTask, sets: TaskSets | None, live: Flags | None, step: _Step
    ) -> pl.Series | None:
        """The codes whose sets the step can change in ``task``, when it adds to several views of the
        channel and they are few (at most :attr:`few_codes`); else None. Those are the live codes (with
        dominating sub-tasks: any other code's set is not kept) or the unsaturated ones (without: a
        saturated set cannot change). Their whole sets, from the rows present, are one elimination run
        where the deltas would be one per view added to, each joining the same large stored views for the
        same few codes (measured on BP at half its rows: the Givenname tasks of a six-record update keep
        1 to 20 codes live, and each delta join of them cost 1-3 ms). Exact: a delta join only finds pairs
        of these codes, and the whole sets hold every pair of them. O(dictionary) in numpy to count."""
        if sum(view in task.channel.views for view in step.arrivals) < 2:
            return None
        if live is not None:
            flags = live
        elif sets is not None:
            flags = ~self._mask(state, sets, task.identifier).flags
        else:
            return None  # no pairs yet: every code is open
        if np.count_nonzero(flags) > self.few_codes:
            return None
        codes = np.flatnonzero(flags)
        return pl.Series(task.identifier, codes, dtype=CODE) if codes.size else None

    def _live_relations(
        self,
        state: LinkageState,
        task: LinkageTask,
        relations: dict[str, pl.DataFrame],
        *,
        delta: str,
        live: Flags,
        shared: SharedWork,
    ) -> dict[str, pl.DataFrame] | None:
        """For a task with dominating sub-tasks: a delta's relations restricted to the live codes
        (:attr:`_dominating`) not caught up whole; None when one is left empty (the join is).

        A stored view's projection restricted to the live codes is kept per (task, view) while both the
        projection and the live array are the same objects (:meth:`_live` hands out the same array while no
        mask changed): a batch of another view that saturates nothing in the task's family reads it again
        without a pass over the projection (O(projection) each, 3 ms at 452,000 rows)."""
        identifier = task.identifier
        filtered = {}
        for view, relation in relations.items():
            if identifier not in relation.columns:
                filtered[view] = relation
                continue
            kept = state.live_rows.get((task.key, view)) if view != delta else None
            if kept is not None and kept[0] is relation and kept[1] is live:
                filtered[view] = kept[2]
                continue
            codes = shared.codes(relation).column(identifier)
            restricted = self._restrict(relation, pl.Series(live[codes]), shared)
            if view != delta:
                state.live_rows[(task.key, view)] = (relation, live, restricted)
            filtered[view] = restricted
        return None if any(frame.is_empty() for frame in filtered.values()) else filtered

    def _fold(
        self,
        state: LinkageState,
        task: LinkageTask,
        sets: TaskSets | None,
        found: pl.DataFrame,
        saturated_now: dict[TaskKey, pl.Series],
        *,
        whole: bool = False,
    ) -> pl.DataFrame | None:
        """Merge found pairs (codes below k, at most k pairs each) into the task's capped sets; the pairs
        added, whose identifier column holds the codes whose set grew (None when none did). ``whole``:
        ``found`` holds the whole capped sets of its codes (each a superset of the code's partial pairs,
        or k pairs), so as many pairs as the partial ones means nothing grew (no merge needed)."""
        identifier = task.identifier
        if sets is None:
            state.linked[task.key] = found  # the task's first pairs, already at most k per code
            state.journal.setdefault(task.key, []).append(found)
            first = self._sets(state, task.key)
            assert first is not None
            _record(saturated_now, task.key, first.saturated.get_column(identifier))
            return found
        # Every code found is below k (saturated codes were left out): merge with the partial sets only.
        holding = self._holding(state, sets, identifier)
        found_codes = found.get_column(identifier)
        if holding.at(found_codes).any():
            # The partial pairs of the codes found: a flag per code, read for every partial pair.
            earlier = _having(sets.partial, identifier, found_codes)
        else:
            earlier = sets.partial.clear()
        if earlier.is_empty():
            merged = added = found  # new codes only (a delta's common case): already at most k per code
        elif whole and found.height == earlier.height:
            return None  # per code, a superset of as many pairs: the same pairs
        else:
            # Earlier pairs come first, so they keep their places; a found pair already there is dropped,
            # and a code takes found pairs up to k (in numpy: the polars query cost 0.6 ms here).
            pairs = found.select(earlier.columns)
            picked = code_arrays.fresh_heads(
                CodeRelation.from_frame(earlier), CodeRelation.from_frame(pairs), [identifier], self.k
            )
            if not picked.size:
                return None
            added = pairs[picked]
            merged = pl.concat([earlier, added])
        self._append_pairs(state, task.key, added)
        full = self._reaching_k(merged, identifier)
        partial = sets.partial
        if full.len():
            self._saturate(state, sets, identifier, full.to_frame())
            _record(saturated_now, task.key, full)
            # Partial pairs are of codes below k, so once the full codes are marked saturated the mask
            # tells which pairs leave the partial sets (a filter, not an anti join).
            if not earlier.is_empty():
                partial = self._drop_saturated(state, sets, identifier, partial)
                holding.set(full, False)
            added_partial = self._drop_saturated(state, sets, identifier, added)
        else:
            added_partial = added
        if added_partial.height:
            sets.partial = pl.concat([partial, added_partial])
            holding.set(added_partial.get_column(identifier), True)
        else:
            sets.partial = partial
        return added

    def _inherit(
        self,
        state: LinkageState,
        task: LinkageTask,
        saturated: pl.Series,
        *,
        step: _Step,
        saturated_now: dict[TaskKey, pl.Series],
        probed: dict[TaskKey, pl.Series],
        shared: SharedWork,
    ) -> list[pl.Series]:
        """Settle codes ``task``'s joins just saturated from the top down: the codes grown, per task.

        Those codes become live in the tasks above (:attr:`_dominating`), which would compute their sets
        level by level. A channel T over more views links a value to a subset of what any channel under
        it links it to, so a code saturated in T is saturated in every task between, with T's k values as
        witnesses. So the codes' whole sets are computed first in the top tasks (as a catch-up), and where
        a code stays below k there, in the tasks one level under them (on BP most new people are
        saturated at the top; values newly saturated by a health condition fail in the few channels that
        join through both Givenname views, or Zipcode and a card type); the codes saturated in a probed
        task T, with their k values, go to every task between ``task`` and T (all hold the changed view,
        as ``task`` does; a task not holding it is not between and was saturated already). Codes not
        settled go on level by level. Exact: every pair added is a pair of the task's join. Cost: one
        catch-up per probed task and one append per task settled.
        """
        grown: list[pl.Series] = []
        codes = saturated.unique()
        above = self._above[task.key]
        targets = list(self._tops[task.key])
        for _ in range(2):  # the tops, then the tasks one level under them
            failed_at: list[TaskKey] = []
            for top_key in targets:
                left = self._probe(
                    state,
                    step=step,
                    top_key=top_key,
                    codes=codes,
                    above=above,
                    saturated_now=saturated_now,
                    probed=probed,
                    shared=shared,
                    grown=grown,
                )
                if left:
                    failed_at.append(top_key)
            targets = lattice.under_all(above, failed_at)
        return grown

    def _probe(
        self,
        state: LinkageState,
        *,
        step: _Step,
        top_key: TaskKey,
        codes: pl.Series,
        above: tuple[TaskKey, ...],
        saturated_now: dict[TaskKey, pl.Series],
        probed: dict[TaskKey, pl.Series],
        shared: SharedWork,
        grown: list[pl.Series],
    ) -> bool:
        """Compute ``codes``' whole sets in one task, give those saturated there to the tasks between;
        whether some code stayed below k there."""
        top = self._by_key[top_key]
        identifier = top.identifier
        sets = self._sets(state, top_key)
        candidates = codes if sets is None else where(codes, ~self._mask(state, sets, identifier).flags)
        if top_key in probed:
            # Codes whose whole sets the task computed earlier in the step and left below k stay so.
            candidates = candidates.filter(~candidates.is_in(probed[top_key].implode()))
        if candidates.is_empty():
            return False
        _record(probed, top_key, candidates)
        found = self._whole_sets(state, top, candidates.sort(), shared, step=step)
        if found.is_empty():
            return True  # nothing joins there (a view not published yet); tasks under it may join
        # The codes with k pairs and which pairs are theirs, from one count (found has at most k per code).
        codes, position, counts = np.unique(
            found.get_column(identifier).to_numpy(), return_inverse=True, return_counts=True
        )
        full = counts >= self.k
        settled = pl.Series(identifier, codes[full], dtype=found.schema[identifier])
        saturated = rows_where(found, full[position]) if settled.len() else found.clear()
        added = self._fold(state, top, sets, found, saturated_now)
        if added is not None:
            grown.append(added.get_column(identifier))
        if saturated.height:
            grown.append(settled)
            for key in lattice.between(top_key, above):
                between = self._sets(state, key)
                witnesses, codes_between = saturated, settled
                if between is not None:
                    already = self._mask(state, between, identifier).at(settled)
                    if already.any():  # rare: a task between saturated some of them by its own joins
                        codes_between = settled.filter(pl.Series(~already))
                        witnesses = saturated.filter(pl.col(identifier).is_in(codes_between.implode()))
                if codes_between.len():
                    self._fold_saturated(
                        state,
                        self._by_key[key],
                        between,
                        witnesses=witnesses,
                        codes=codes_between,
                        saturated_now=saturated_now,
                    )
        return saturated.height < candidates.len() * self.k

    def _reaching_k(self, pairs: pl.DataFrame, identifier: str) -> pl.Series:
        """The identifier codes with k pairs in ``pairs`` (at most k each, distinct): counted in numpy,
        O(pairs log pairs), no polars query (a merge or a probe makes several per update)."""
        codes, counts = np.unique(pairs.get_column(identifier).to_numpy(), return_counts=True)
        return pl.Series(identifier, codes[counts >= self.k], dtype=pairs.schema[identifier])

    @cached_property
    def _by_key(self) -> dict[TaskKey, LinkageTask]:
        """The tasks by key."""
        return {task.key: task for task in self.tasks}

    def _fold_saturated(
        self,
        state: LinkageState,
        task: LinkageTask,
        sets: TaskSets | None,
        *,
        witnesses: pl.DataFrame,
        codes: pl.Series,
        saturated_now: dict[TaskKey, pl.Series],
    ) -> None:
        """:meth:`_fold` of k pairs for each of ``codes``, none saturated in the task: for codes without
        partial pairs appended and marked saturated, no merge needed (else the general merge)."""
        identifier = task.identifier
        if sets is None or self._holding(state, sets, identifier).at(codes).any():
            self._fold(state, task, sets, witnesses, saturated_now)
            return
        self._append_pairs(state, task.key, witnesses)
        self._saturate(state, sets, identifier, codes.to_frame(identifier))
        _record(saturated_now, task.key, codes)

    @staticmethod
    def _append_pairs(state: LinkageState, key: TaskKey, pairs: pl.DataFrame) -> None:
        """Append pairs to a task's linked set and its journal. Earlier pairs are never rewritten, so the
        state is append-only and the journal replays it (take_changes)."""
        state.linked[key] = _appended(state.linked[key], pairs)
        state.journal.setdefault(key, []).append(pairs)

    def _live(self, state: LinkageState, task: LinkageTask, sets: TaskSets | None) -> Flags | None:
        """Per identifier code, whether the task must keep its set exact: saturated in every dominating
        sub-task (:attr:`_dominating`) and not yet in this one. None when no code is. O(dictionary), in
        numpy, when a mask it reads changed since the last call for the task; else the same array as then
        (cached in the state, so callers must not change it: copy first). O(dominating sub-tasks)."""
        masks = []
        for key in self._dominating[task.key]:
            below = self._sets(state, key)
            if below is None or not below.saturated.height:
                return None
            masks.append(self._mask(state, below, task.identifier))
        if sets is not None:
            masks.append(self._mask(state, sets, task.identifier))
        read = tuple((mask, mask.version) for mask in masks)
        cached = state.live.get(task.key)
        if cached is not None and _same_reads(cached[0], read):
            return cached[1]
        assert self._dominating[task.key], "only tasks with dominating sub-tasks have live codes"
        live = masks[0].flags.copy()
        for mask in masks[1 : len(self._dominating[task.key])]:
            np.logical_and(live, mask.flags, out=live)
        if sets is not None:
            live &= ~masks[-1].flags
        found = live if live.any() else None
        state.live[task.key] = (read, found)
        return found

    @staticmethod
    def _plan(state: LinkageState, key: TaskKey, view: str, size: int, others: Iterable[pl.DataFrame]) -> Plan:
        """The elimination plan of (task, changed view, delta size class, size classes of the other
        relations); a new one starts from the order of the nearest delta size class recorded for the same
        other relations (a neighbour's order is almost always as good, and recording one costs distinct
        counts of whole views): orders only change the work, never the result.

        The other relations' classes are part of the key because the best order depends on them too: a plan
        recorded while the views were small (a first load) joined whole views first, and replayed once
        they had grown it cost a probe of 132 codes 30 ms where a new plan starting from the codes cost 6.
        ``others``: the relations whose size ``size`` does not stand for (all but the delta's view, or
        those not restricted to the codes); their size classes (factors of 4) are in the key."""
        context = tuple(frame.height.bit_length() // 2 for frame in others)
        plan = state.plans.get((key, view, size, context))
        if plan is None:
            for distance in (1, 2):
                near = state.plans.get((key, view, size - distance, context)) or state.plans.get(
                    (key, view, size + distance, context)
                )
                if near is not None:
                    plan = Plan(order=list(near.order))
                    break
            else:
                plan = Plan()
            state.plans[(key, view, size, context)] = plan
        return plan

    @staticmethod
    def _restrict(relation: pl.DataFrame, rows: pl.Series, shared: SharedWork) -> pl.DataFrame:
        """``relation``'s rows where ``rows`` is true, shared by the tasks of the batch that keep the same."""
        return shared.subset(relation, "rows", rows, lambda: rows_where(relation, rows.to_numpy()))

    def _newly_live(
        self, task: LinkageTask, live: Flags, saturated_now: Mapping[TaskKey, pl.Series], first_new: int
    ) -> pl.Series | None:
        """The live codes that became live in this step (saturated in a dominating sub-task by the step's
        rows): their sets were not kept while they were not live, so they are computed whole. Values
        first seen in the step (codes from ``first_new``) had no earlier rows: the delta joins give their
        whole sets."""
        parts = [saturated_now[key] for key in self._dominating[task.key] if key in saturated_now]
        if not parts:
            return None
        codes = pl.concat(parts).unique()
        codes = where(codes.filter(codes < first_new), live).sort()
        return codes if codes.len() else None

    def _whole_sets(
        self,
        state: LinkageState,
        task: LinkageTask,
        codes: pl.Series,
        shared: SharedWork,
        *,
        step: _Step | None = None,
    ) -> pl.DataFrame:
        """The whole capped sets of ``codes`` in the task, from the rows present (views holding the
        identifier restricted to the codes first: the work follows the codes, not the state): values
        catching up, values probed in a top task, values a withdrawal reached."""
        relations = {}
        for view, keep in self._needed(task).items():
            relation = self._current(state, view, keep, step)
            if relation is None:
                return pl.DataFrame()
            if task.identifier in keep:
                # The kind names the column: two identifiers' code lists can be equal ([0] and [0]) while
                # they pick different rows of one projection holding both.
                kind = f"codes of {task.identifier}"
                relation = shared.subset(relation, kind, codes, partial(_having, relation, task.identifier, codes))
            relations[view] = relation
        size = codes.len().bit_length() // 2
        others = [relation for relation in relations.values() if task.identifier not in relation.columns]
        plan = self._plan(state, task.key, "\0whole", size, others)
        return linked_values(relations, task.identifier, task.sensitive, self.k, shared, plan=plan)

    def _sets(self, state: LinkageState, key: TaskKey) -> TaskSets | None:
        """The task's capped sets split by saturation (None before its first pairs); O(pairs) to build."""
        sets = state.sets.get(key)
        if sets is None:
            linked = state.linked.get(key)
            if linked is None:
                return None
            identifier = key[1]
            counts = linked.group_by(identifier).len()
            below = counts.filter(pl.col("len") < self.k).select(identifier)
            sets = TaskSets(
                saturated=linked.clear().select(identifier),
                partial=linked.join(below, on=identifier, how="semi"),
            )
            self._saturate(state, sets, identifier, counts.filter(pl.col("len") >= self.k).select(identifier))
            state.sets[key] = sets
        return sets

    @staticmethod
    def _holding(state: LinkageState, sets: TaskSets, identifier: str) -> CodeFlags:
        """Which codes have partial pairs, covering the identifier's dictionary."""
        size = state.seen.dictionaries[identifier].len()
        if sets.holding is None:
            sets.holding = CodeFlags().fit(size)
            sets.holding.set(sets.partial.get_column(identifier), True)
        return sets.holding.fit(size)

    @staticmethod
    def _mask(state: LinkageState, sets: TaskSets, identifier: str) -> CodeFlags:
        """The saturation mask, covering the identifier's dictionary (codes given since are not saturated)."""
        return sets.mask.fit(state.seen.dictionaries[identifier].len())

    def _saturate(self, state: LinkageState, sets: TaskSets, identifier: str, codes: pl.DataFrame) -> None:
        """Mark identifier codes whose sets reached k values."""
        if codes.height:
            sets.saturated = pl.concat([sets.saturated, codes])
            self._mask(state, sets, identifier).set(codes.get_column(identifier), True)

    def _drop_saturated(
        self, state: LinkageState, sets: TaskSets, identifier: str, frame: pl.DataFrame
    ) -> pl.DataFrame:
        """``frame``'s rows whose identifier code is not saturated, by the mask: O(rows), no hash table.
        ``frame`` itself when none is (the same object, so tasks of one batch share its joins)."""
        saturated = self._mask(state, sets, identifier).at(frame.get_column(identifier))
        return rows_where(frame, ~saturated)

    def _unsaturated(
        self,
        state: LinkageState,
        sets: TaskSets,
        identifier: str,
        view: str,
        relation: pl.DataFrame,
        *,
        delta: bool,
    ) -> pl.DataFrame:
        """``relation`` without the saturated identifier codes. A delta is looked up in the saturation mask,
        O(delta). A stored view's projection keeps its filtered form across batches and carries it forward
        by the codes saturated since and the rows appended since (a rebuilt projection is filtered anew)."""
        if delta:
            return self._drop_saturated(state, sets, identifier, relation)
        kept = state.projections[(view, tuple(relation.columns))]
        cached = sets.filtered.get(view)
        if cached is not None and cached.build == kept.build and cached.rows <= kept.frame.height:
            # The projection only grew since: carry the filtered form forward by the codes saturated
            # since and the rows appended since, instead of filtering every row again.
            frame = cached.frame
            if cached.left_out < sets.saturated.height:
                frame = frame.join(sets.saturated.slice(cached.left_out), on=identifier, how="anti")
            if kept.frame.height > cached.rows:
                frame = _appended(frame, self._drop_saturated(state, sets, identifier, kept.frame.slice(cached.rows)))
        else:
            frame = self._drop_saturated(state, sets, identifier, relation)
        sets.filtered[view] = Unsaturated(kept.build, kept.frame.height, sets.saturated.height, frame)
        return frame

    def merge(self, state: LinkageState, other: LinkageState) -> Delta[LinkageFinding]:
        """Fold another partition's state into ``state``, exactly, by replaying its rows."""
        return self.update(state, other.seen.decoded())

    def result(
        self,
        state: LinkageState,
        *,
        without: frozenset[str] = frozenset(),
        only: Mapping[str, pl.Series] | None = None,
    ) -> list[LinkageFinding]:
        """Every disclosed (E, e, S) with its minimal channel, sorted. O(size of the state).

        ``without``: views to leave out, as if never published (``check --impact``): the channels that
        hold none of them are exactly the closure of the other views, so their tasks' sets are reused.
        ``only``: per identifier attribute, the codes to report on (an update's touched values); other
        identifier attributes are left out.
        """
        order = {task.channel.views: i for i, task in enumerate(self.tasks)}
        findings: list[LinkageFinding] = []
        for identifier in self.identifiers:
            for sensitive in self.sensitive:
                if only is not None and identifier not in only:
                    continue
                codes = only.get(identifier) if only is not None else None
                findings.extend(self._result_pair(state, identifier, sensitive, order, without=without, codes=codes))
        return sorted(findings, key=finding_order)

    def _facts(
        self, state: LinkageState, identifier: str, codes: pl.Series, without: frozenset[str]
    ) -> dict[int, IdentifierFacts]:
        """What the views holding ``identifier`` publish about the tuples of ``codes`` (decoded)."""
        facts: dict[int, IdentifierFacts] = {}
        if codes.is_empty():
            return facts
        for view in self._proof.holders(identifier):
            if view.name in without:
                continue
            rows = state.seen.present(view.name)
            if rows is None:
                continue
            hits = rows.filter(pl.col(identifier).is_in(codes.implode()))
            decoded = decode_frame(state.seen.dictionaries, hits)
            for code, row in zip(hits.get_column(identifier).to_list(), decoded.iter_rows(named=True), strict=True):
                facts.setdefault(code, IdentifierFacts()).add_row(row, view.where)
        return facts

    def _disclosing(
        self,
        state: LinkageState,
        identifier: str,
        sensitive: str,
        without: frozenset[str],
        codes: pl.Series | None = None,
    ) -> list[tuple[LinkageTask, pl.DataFrame]]:
        """The tasks of (E, S) with identifier codes linked to fewer than k values, each with its partial
        pairs (every code of them is below k: disclosed; with ``codes``, tasks holding none of them are
        left out, O(codes) each in numpy)."""
        found = []
        for task in self.tasks:
            if task.identifier != identifier or task.sensitive != sensitive or without & set(task.channel.views):
                continue
            sets = self._sets(state, task.key)
            if sets is None or sets.partial.is_empty():
                continue
            if codes is not None and not self._holding(state, sets, identifier).at(codes).any():
                continue
            found.append((task, sets.partial))
        return found

    def _result_pair(
        self,
        state: LinkageState,
        identifier: str,
        sensitive: str,
        order: Mapping[tuple[str, ...], int],
        *,
        without: frozenset[str],
        codes: pl.Series | None = None,
    ) -> list[LinkageFinding]:
        disclosing = self._disclosing(state, identifier, sensitive, without, codes)
        if not disclosing:
            return []
        # Every disclosing task's sets of the codes asked for, grouped per (code, task), as one query (a
        # filter and a group-by per task were two queries each, for 15 tasks per pair on BP).
        query = pl.concat(
            [
                frame.lazy().select(
                    identifier,
                    sensitive,
                    pl.lit(task.channel.level, dtype=pl.UInt32).alias("_level"),
                    pl.lit(order[task.channel.views], dtype=pl.UInt32).alias("_channel"),
                )
                for task, frame in disclosing
            ]
        )
        if codes is not None:
            query = query.filter(pl.col(identifier).is_in(codes.implode()))
        query = query.group_by(identifier, "_level", "_channel").agg(pl.col(sensitive).alias("_values"))
        # The channels whose links need selections proven (certainty.py), by their index in ``order``.
        to_prove = {
            order[task.channel.views]: self._open_selections[task.key]
            for task, _ in disclosing
            if self._open_selections[task.key]
        }
        if to_prove:
            everything = in_memory(query)
            unproven = everything.filter(pl.col("_channel").is_in(list(to_prove))).get_column(identifier).unique()
            facts = self._facts(state, identifier, unproven, without)
            pairs = zip(everything.get_column(identifier), everything.get_column("_channel"), strict=True)
            proven = [
                channel not in to_prove or self._proof.proven(facts.get(code), to_prove[channel])
                for code, channel in pairs
            ]
            query = everything.lazy().with_columns(pl.Series("_proven", proven, dtype=pl.Boolean))
        else:
            query = query.with_columns(pl.lit(True).alias("_proven"))
        # A proven channel makes the finding certain: report the lowest level among proven channels;
        # with none proven, the lowest level of all, as a possible link.
        chosen = query.filter(pl.col("_proven") | ~pl.col("_proven").any().over(identifier))
        minimal = in_memory(
            chosen.filter(pl.col("_level") == pl.col("_level").min().over(identifier))
            .sort("_channel")
            .group_by(identifier, maintain_order=True)
            .agg(pl.col("_channel"), pl.col("_values"), pl.col("_proven").first())
            .sort(identifier)
        )
        by_index = {order[task.channel.views]: task.channel.views for task in self.tasks}
        dictionaries = state.seen.dictionaries
        identifiers = decode(dictionaries, identifier, minimal.get_column(identifier).to_list())
        # The sensitive values of every finding in one gather (not one decode per finding).
        used = minimal.get_column("_values").explode().explode().unique().drop_nulls().sort().to_list()
        sensitive_value = dict(zip(used, decode(dictionaries, sensitive, used), strict=True))
        findings = []
        for value, (_, indices, value_codes, certain) in zip(identifiers, minimal.iter_rows(), strict=True):
            members = tuple(by_index[i] for i in indices)
            channel_values = tuple(
                tuple(sorted((sensitive_value[code] for code in codes), key=_sort_key)) for codes in value_codes
            )
            findings.append(
                LinkageFinding(
                    k=self.k,
                    identifier_attribute=identifier,
                    identifier_value=value,  # type: ignore[arg-type]
                    sensitive_attribute=sensitive,
                    sensitive_values=channel_values[0],
                    views=members[0],
                    channels=members,
                    certain=bool(certain),
                    channel_values=channel_values,
                    joined_on=self._joined_on[members[0]],
                )
            )
        return findings


def run_linkage(
    check: LinkageCheck, views: Mapping[str, pl.DataFrame], progress: Progress | None = None
) -> list[LinkageFinding]:
    """Batch check: one update with every row, then the result (the same code the stream worker runs)."""
    state = check.initialize()
    # From an empty state every finding of the result is raised by this one update.
    return sorted(check.update(state, views, progress).raised, key=finding_order)


@dataclass(frozen=True)
class Linkage:
    """The linkage check behind the check protocol (:mod:`streamdetect.checks.protocol`).

    State partitions by identifier value: everything a value's findings depend on (its capped sets in
    every task of its (identifier, sensitive) pairs, which of them are live, its certainty facts) is
    computed from the rows holding that value and the whole of the views without the identifier
    (docs/design.md, co-partitioning).
    """

    check: LinkageCheck
    name = "linkage"
    properties = CheckProperties(
        needs_table=False, exact=True, incremental=True, retractions=True, partition="identifier value"
    )

    @classmethod
    def from_topology(cls, topology: Topology, k: int | None = None, max_level: int | None = None) -> Linkage:
        """The check as the topology configures it."""
        return cls(LinkageCheck.from_topology(topology, k=k, max_level=max_level))

    @property
    def k(self) -> int:
        """The threshold."""
        return self.check.k

    def initialize(self) -> LinkageState:
        """No rows seen."""
        return self.check.initialize()

    def validate(self, state: LinkageState, batch: Batch) -> str | None:
        """A withdrawn row that is not published."""
        attributes = {view.name: view.attributes for view in self.check.views}
        return state.seen.check_retractions(batch.retracted, attributes)

    def update(
        self, state: LinkageState, batch: Batch, progress: ProgressFactory | None = None
    ) -> Delta[LinkageFinding]:
        """Withdraw the batch's retracted view rows, then add its new ones."""
        callback = None
        if progress is not None:
            tasks = self.check.tasks
            callback = progress(self.name, sum(1 for view in batch.views for t in tasks if view in t.channel.views))
        return self.check.update(state, batch.views, callback, batch.retracted)

    def merge(self, state: LinkageState, other: LinkageState) -> Delta[LinkageFinding]:
        """Fold another partition's state in."""
        return self.check.merge(state, other)

    def result(self, state: LinkageState) -> list[LinkageFinding]:
        """Every disclosure, in report order."""
        return self.check.result(state)

    def encode(self, state: LinkageState) -> bytes:
        """The state's codec."""
        return state.to_bytes()

    def decode(self, data: bytes) -> LinkageState:
        """Inverse of :meth:`encode`, warmed for the next batches (a restore is O(state) already)."""
        state = LinkageState.from_bytes(data)
        self.check.warm(state)
        return state

    def changes(self, state: LinkageState) -> dict[str, bytes]:
        """Append-only pieces of what grew since the last call (:meth:`LinkageState.take_changes`)."""
        return state.take_changes()

    def apply_changes(self, state: LinkageState, pieces: Mapping[str, bytes]) -> LinkageState:
        """Append another state's pieces (:meth:`LinkageState.apply_changes`)."""
        state.apply_changes(pieces)
        return state

    def summary(self, findings: int) -> CheckSummary:
        """Channels of the closure and (channel, E, S) tasks."""
        channels = sum(len(level) for level in self.check.levels)
        return CheckSummary(self.name, self.k, channels, len(self.check.tasks), findings)
