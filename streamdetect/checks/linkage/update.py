"""How an update folds a batch into the linkage state: rows stored, then per task one capped join of
each view's new rows with the rows present of the others, withdrawals by recomputing what they reach,
and the top-down settling of the values a step saturates (docs/design.md).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl

from streamdetect.checks.findings import Delta, LinkageFinding, diff
from streamdetect.checks.linkage.arrivals import Arrivals, Step
from streamdetect.checks.linkage.beyond import SearchProgress
from streamdetect.checks.linkage.frames import (
    distinct_codes,
    having,
    record_codes,
)
from streamdetect.checks.linkage.results import _Results
from streamdetect.checks.linkage.state import (
    Flags,
    LinkageState,
    TaskKey,
    TaskSets,
    rows_where,
    where,
)
from streamdetect.checks.linkage.tasks import LinkageTask, Progress
from streamdetect.relational import channel_lattice as lattice
from streamdetect.relational import code_arrays
from streamdetect.relational.code_arrays import CodeRelation
from streamdetect.relational.dictionary import CODE, decode
from streamdetect.relational.linked_values import SharedWork, appended, cap_per_key, linked_values

#: An update adding at least 1/BULK of the rows stored is a bulk load: it warms the caches (LinkageCheck.warm).
BULK = 4


#: A column naming which top task settled a pair (not an attribute name: it starts with NUL).
_TOP = "\0top"


class _Updates(_Results):
    """Folding batches in."""

    def update(
        self,
        state: LinkageState,
        batch: Mapping[str, pl.DataFrame],
        progress: Progress | None = None,
        retracted: Mapping[str, pl.DataFrame] | None = None,
        search_progress: SearchProgress | None = None,
    ) -> Delta[LinkageFinding]:
        """Withdraw ``retracted`` rows, then add new rows of one or more views; return the findings raised
        and cleared.

        Exact. Additions: every view's rows stored first, then for each task whose channel holds a view
        added to, one capped join of each such view's new rows with the rows present of the other views
        (:class:`Step`), O(sum of sizes * k) plus cycle bags. Withdrawals
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
            state.settled.clear()  # a withdrawal may unsaturate a value in a component's top
            self._withdraw(state, withdrawn, attributes, touched)
        sizes = {e: state.seen.dictionaries[e].len() if e in state.seen.dictionaries else 0 for e in self.identifiers}
        arrived: dict[str, Arrivals] = {}
        for name, frame in pending:
            before = self._version(state, name)
            new, _ = state.seen.add(name, frame, attributes[name])
            for identifier in self._proving:
                # New rows holding a value are facts that may prove its links (only where some channel
                # has selections to prove; otherwise a value's findings change only if its sets do).
                if identifier in new.columns and new.height:
                    touched.setdefault(identifier, []).append(new.get_column(identifier))
            if new.height:
                arrived[name] = Arrivals(name, new, before)
        if arrived:
            self._add(state, Step(arrived, sizes), touched, progress)
        if not self.complete:
            # Above the kept levels nothing is kept: a row of any view may link a value there, so every
            # value present is looked at again (beyond.py; the search itself follows the open values).
            for identifier in self.identifiers:
                present = self._present_codes(state, identifier, frozenset())
                if present.size:
                    touched.setdefault(identifier, []).append(pl.Series(identifier, present, dtype=CODE))
        codes = {identifier: pl.concat(parts).drop_nulls().unique() for identifier, parts in touched.items()}
        delta = self._diff_touched(state, state.open, codes, search_progress)
        if sum(frame.height for frame in batch.values()) * BULK >= state.seen.total():
            self.warm(state)
        return delta

    def warm(self, state: LinkageState) -> None:
        """Build what later micro-batches read and would otherwise build on first use: every view's kept
        projections for every task, every task's split sets and saturation mask, the value index.

        O(state), so done only where that is the order of the step's own work: after a bulk load (an update
        whose rows are at least 1/``BULK`` of the rows stored) and after a restore. Changes no result.
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
        self, state: LinkageState, step: Step, touched: dict[str, list[pl.Series]], progress: Progress | None
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

        A task reads a view only through its projection on what the task needs (:meth:`_needed`: E, S and
        the channel's join attributes), as a set. A withdrawal changes the task only where a projected row
        vanished, its last present row gone (:meth:`_vanished`): a withdrawn password whose gender and card
        type other rows still show changes nothing for the tasks that do not read passwords. A vanished
        projected row can only take values out of the sets of the identifier values its join rows hold:
        those are found by joining it with the rows present (before the other views' withdrawals of this
        batch, a superset). When the row's view holds the sensitive attribute, its join rows hold its own
        sensitive value, so only the sets holding one of the vanished values can lose one; the others keep
        every value's support. The sets reached are then recomputed from the rows present, with the views
        holding the identifier restricted to the reached values first, so the work follows what the
        withdrawal reaches, not the state.
        """
        reached: dict[TaskKey, list[pl.Series]] = {}
        # One for the update: frames are keyed by identity and kept alive, so a projection rebuilt after its
        # view's withdrawals is a new key, never a stale one.
        shared = SharedWork(state.caps)
        for name, frame in withdrawn:
            gone, _ = state.seen.retract(name, frame, attributes[name])
            if not gone.height:
                continue  # every withdrawn row still occurs: nothing changes
            for identifier in self.identifiers:
                if identifier in gone.columns:
                    touched.setdefault(identifier, []).append(gone.get_column(identifier))
            withdrawn_rows = Arrivals(name, gone, None)
            for task in self.tasks:
                if name not in task.channel.views or task.key not in state.linked:
                    continue
                keep = self._needed(task)[name]
                vanished = self._vanished(state, withdrawn_rows, keep)
                if not vanished.height:
                    continue  # every projected row is still shown by a row present: the task's join is the same
                if task.identifier in keep:
                    # The join rows of a vanished row hold its own identifier value: no join needed.
                    ids = vanished.get_column(task.identifier).unique()
                    hit = state.linked[task.key].filter(pl.col(task.identifier).is_in(ids.implode()))
                    if task.sensitive in keep:
                        # ... and its own sensitive value: a capped set holding none of the vanished values
                        # kept the support of every value it holds, so it stays exact.
                        values = vanished.get_column(task.sensitive).implode()
                        hit = hit.filter(pl.col(task.sensitive).is_in(values))
                elif task.sensitive in keep:
                    hit = self._lost_values(state, task, withdrawn_rows, vanished, shared)
                else:
                    ids = self._reach(state, task, withdrawn_rows, shared)
                    hit = state.linked[task.key].filter(pl.col(task.identifier).is_in(ids.implode()))
                if hit.height:
                    reached.setdefault(task.key, []).append(hit.get_column(task.identifier))
        self._recompute(state, reached, touched, shared)

    def _reach(self, state: LinkageState, task: LinkageTask, withdrawn: Arrivals, shared: SharedWork) -> pl.Series:
        """The identifier values the join rows of ``withdrawn``'s vanished projected rows hold in ``task``
        (one capped join, the vanished rows as the delta, the rows present of the others as the rest)."""
        relations = self._relations(state, task, withdrawn)
        if relations is None:
            return pl.Series(task.identifier, [], dtype=CODE)
        name = withdrawn.view
        size = relations[name].height.bit_length() // 2
        others = [relation for view, relation in relations.items() if view != name]
        plan = self._plan(state, task.key, f"\0reach {name}", size, others)
        joined = linked_values(relations, task.identifier, task.sensitive, 1, shared, plan=plan)
        return joined.get_column(task.identifier)

    def _lost_values(
        self, state: LinkageState, task: LinkageTask, withdrawn: Arrivals, vanished: pl.DataFrame, shared: SharedWork
    ) -> pl.DataFrame:
        """The stored pairs a withdrawal from a view holding the sensitive attribute (not the identifier) may
        have taken the support of. The join rows of a vanished row hold its own sensitive value, so only
        pairs of the vanished values can lose theirs. A value no row present of the view carries any more
        lost every derivation: its pairs are all taken, with no join (a withdrawn password, held by one row
        of one view). For a value still carried, the pairs whose identifier value the vanished rows reach
        (:meth:`_reach`, with only those rows as the delta)."""
        column = task.sensitive
        values = vanished.get_column(column).unique()
        held = state.linked[task.key].filter(pl.col(column).is_in(values.implode()))
        if not held.height:
            return held
        present = self._projection(state, withdrawn.view, list(vanished.columns))
        carried = (
            values.filter(values.is_in(present.get_column(column).implode())) if present is not None else values.clear()
        )
        if not carried.len():
            return held
        lost = held.filter(~pl.col(column).is_in(carried.implode()))
        rest = Arrivals(withdrawn.view, withdrawn.rows, None)
        rest.projected[tuple(vanished.columns)] = vanished.filter(pl.col(column).is_in(carried.implode()))
        ids = self._reach(state, task, rest, shared)
        reached = held.filter(pl.col(column).is_in(carried.implode()) & pl.col(task.identifier).is_in(ids.implode()))
        return pl.concat([lost, reached])

    def _vanished(self, state: LinkageState, withdrawn: Arrivals, keep: list[str]) -> pl.DataFrame:
        """The distinct projections on ``keep`` of withdrawn rows that no row present of their view shows
        any more (the view's withdrawals applied), once per attribute set: the delta of the reach joins
        (:meth:`_relations` reads it from ``withdrawn.projected``). O(view) for the view's projection on
        ``keep``, which is rebuilt once and kept for the batch's later joins."""
        key = tuple(keep)
        if key not in withdrawn.projected:
            projected = distinct_codes(withdrawn.rows, keep)
            present = self._projection(state, withdrawn.view, keep)
            if present is not None and present.height and projected.height:
                # In numpy over the codes, as a kept projection's growth is probed (_grow).
                still = code_arrays.shown(CodeRelation.from_frame(projected), state.caps.codes(present), keep)
                projected = rows_where(projected, ~still)
            withdrawn.projected[key] = projected
        return withdrawn.projected[key]

    def _recompute(
        self,
        state: LinkageState,
        reached: Mapping[TaskKey, list[pl.Series]],
        touched: dict[str, list[pl.Series]],
        shared: SharedWork,
    ) -> None:
        """Recompute the capped sets of the identifier values reached, per task, from the rows present.

        Settled from the tops first (:meth:`_from_tops`): a value with k values in a top task has them in
        every task under it. The others by level, so that a task's dominating sub-tasks are exact first: a
        reached value that is no longer live in a task (:attr:`_dominating`) loses its pairs there instead
        of being recomputed (its set cannot decide a report; an empty stored set is a subset of the true
        one).
        """
        codes_of = {key: pl.concat(parts).unique() for key, parts in reached.items() if parts}
        fresh: dict[TaskKey, tuple[pl.Series, pl.DataFrame]] = {}
        settled = self._from_tops(state, codes_of, fresh, shared)
        # Views without the identifier enter every task as their kept projections: shared, with their
        # eliminations; those holding it are restricted to the values reached.
        for task in self.tasks:
            key = task.key
            codes = codes_of.get(key)
            if codes is None:
                continue
            touched.setdefault(task.identifier, []).append(codes)
            linked = state.linked[key]
            kept = linked.filter(~pl.col(task.identifier).is_in(codes.implode()))
            parts = []
            inherited = settled.get(key)
            if inherited is not None:
                parts.append(inherited.select(kept.columns))
                codes = codes.filter(~codes.is_in(inherited.get_column(task.identifier).implode()))
            live = codes
            if self._dominating[key]:
                mask = self._live(state, task, None)
                live = where(codes, mask) if mask is not None else codes.clear()
            if live.len():
                known = fresh.get(key)
                if known is not None:
                    # Computed whole for the tasks under this top (codes with no pair included): a code's
                    # whole set is its own.
                    computed, pairs = known
                    parts.append(pairs.filter(pl.col(task.identifier).is_in(live.implode())).select(kept.columns))
                    live = live.filter(~live.is_in(computed.implode()))
                # The task has linked sets, so every view of its channel published: the frame has the pairs'
                # columns.
                parts.append(self._whole_sets(state, task, live, shared).select(kept.columns))
            again = pl.concat(parts) if parts else kept.clear()
            state.linked[key] = pl.concat([kept, again]).rechunk()
            state.sets.pop(key, None)
            # The pieces: drop the codes' pairs, then append; pairs journaled before are dropped the same way.
            state.unlinked.setdefault(key, []).append(codes_of[key])
            dropped = ~pl.col(task.identifier).is_in(codes_of[key].implode())
            state.journal[key] = [frame.filter(dropped) for frame in state.journal.get(key, [])] + [again]

    def _from_tops(
        self,
        state: LinkageState,
        codes_of: Mapping[TaskKey, pl.Series],
        fresh: dict[TaskKey, tuple[pl.Series, pl.DataFrame]],
        shared: SharedWork,
    ) -> dict[TaskKey, pl.DataFrame]:
        """Per reached task under a top, the k pairs of its reached codes that some top task links to k
        values (a channel over more views links a value to a subset of what a channel under it does, so
        the top's k values are k values of the task's set, and its set is saturated: exact as a capped
        set). A top's set of a code is its stored one when the withdrawals did not reach the code there
        (still exact), else computed whole, once for every task under it (the codes and their pairs kept in
        ``fresh``, which the top's own recomputation reads). On BP the withdrawals of a batch reach a few
        hundred given names in some seventy tasks; one whole-set run in each top replaces most of theirs."""
        wanted: dict[TaskKey, list[pl.Series]] = {}
        for key, codes in codes_of.items():
            for top in self._tops[key]:
                if top in state.linked:
                    wanted.setdefault(top, []).append(codes)
        at_top: dict[TaskKey, pl.DataFrame] = {}
        for top, parts in wanted.items():
            task = self._by_key[top]
            identifier = task.identifier
            codes = pl.concat(parts).unique()
            again = codes_of.get(top)
            stored = state.linked[top]
            if again is not None:
                computed = codes.filter(codes.is_in(again.implode())).sort()
                whole = self._whole_sets(state, task, computed, shared).select(stored.columns)
                fresh[top] = (computed, whole)
                codes = codes.filter(~codes.is_in(again.implode()))
                pairs = pl.concat([stored.filter(pl.col(identifier).is_in(codes.implode())), whole])
            else:
                pairs = stored.filter(pl.col(identifier).is_in(codes.implode()))
            full = pairs.filter(pl.len().over(identifier) >= self.k)
            at_top[top] = full
        settled: dict[TaskKey, pl.DataFrame] = {}
        for key, codes in codes_of.items():
            found = [
                at_top[top].with_columns(pl.lit(position, pl.UInt32).alias(_TOP))
                for position, top in enumerate(self._tops[key])
                if top in at_top
            ]
            if not found:
                continue
            identifier = key[1]
            pairs = pl.concat(found).filter(pl.col(identifier).is_in(codes.implode()))
            # Several tops may settle a code: the pairs of one of them (k, as a capped set holds).
            first = pl.col(_TOP) == pl.col(_TOP).min().over(identifier)
            settled[key] = pairs.filter(first).drop(_TOP)
        return settled

    def _diff_touched(
        self,
        state: LinkageState,
        open_findings: dict[tuple[object, ...], LinkageFinding],
        codes: Mapping[str, pl.Series],
        search_progress: SearchProgress | None = None,
    ) -> Delta[LinkageFinding]:
        """Recompute the findings of the touched identifier codes only; diff them with the open ones."""
        after = self.result(state, only=codes, progress=search_progress)
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

    def _apply(
        self,
        state: LinkageState,
        *,
        task: LinkageTask,
        step: Step,
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
            record_codes(saturated_now, task.key, first.saturated.get_column(identifier))
            return found
        # Every code found is below k (saturated codes were left out): merge with the partial sets only.
        holding = self._holding(state, sets, identifier)
        found_codes = found.get_column(identifier)
        if holding.at(found_codes).any():
            # The partial pairs of the codes found: a flag per code, read for every partial pair.
            earlier = having(sets.partial, identifier, found_codes)
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
            record_codes(saturated_now, task.key, full)
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
        step: Step,
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
        record_codes(saturated_now, task.key, codes)

    @staticmethod
    def _append_pairs(state: LinkageState, key: TaskKey, pairs: pl.DataFrame) -> None:
        """Append pairs to a task's linked set and its journal. Earlier pairs are never rewritten, so the
        state is append-only and the journal replays it (take_changes)."""
        state.linked[key] = appended(state.linked[key], pairs)
        state.journal.setdefault(key, []).append(pairs)

    def _probe(
        self,
        state: LinkageState,
        *,
        step: Step,
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
        record_codes(probed, top_key, candidates)
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

    def merge(self, state: LinkageState, other: LinkageState) -> Delta[LinkageFinding]:
        """Fold another partition's state into ``state``, exactly, by replaying its rows."""
        return self.update(state, other.seen.decoded())
