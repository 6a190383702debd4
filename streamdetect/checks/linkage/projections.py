"""The relations a linkage task joins: each view's rows projected to the task's attributes, kept
between batches while the view does not change, restricted to the codes still open, and the probe that
joins a delta with them.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

import numpy as np
import polars as pl

from streamdetect.checks.linkage.arrivals import Arrivals, Step
from streamdetect.checks.linkage.frames import (
    all_present,
    distinct_codes,
    having,
)
from streamdetect.checks.linkage.saturation import _Saturation
from streamdetect.checks.linkage.state import (
    Flags,
    KeptProjection,
    LinkageState,
    TaskKey,
    TaskSets,
    rows_where,
)
from streamdetect.checks.linkage.tasks import LinkageTask
from streamdetect.relational import code_arrays
from streamdetect.relational.code_arrays import CodeRelation, indices
from streamdetect.relational.dictionary import CODE
from streamdetect.relational.linked_values import Plan, SharedWork, in_memory, linked_values


class _Projections(_Saturation):
    """The relations a task joins, kept and restricted."""

    def _relations(
        self, state: LinkageState, task: LinkageTask, delta: Arrivals, step: Step | None = None
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

    def _delta_projection(self, state: LinkageState, delta: Arrivals, keep: list[str]) -> pl.DataFrame:
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
            fresh = delta.rows.drop_nulls() if growing and whole else distinct_codes(delta.rows, keep)
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
        grown = state.caps.grown(stored.frame, fresh)
        key = tuple(stored.frame.columns)
        state.projections[(view, key)] = KeptProjection(self._version(state, view), grown, stored.build)
        return fresh

    @staticmethod
    def _version(state: LinkageState, view: str) -> tuple[int, int, int]:
        """What identifies the rows present of ``view``: distinct rows stored, present, count events."""
        seen = state.seen
        rows = seen.rows.get(view)
        return (0, 0, 0) if rows is None else (rows.height, seen.height(view), seen.logged.get(view, 0))

    def _current(self, state: LinkageState, view: str, keep: list[str], step: Step | None) -> pl.DataFrame | None:
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
        if cached is not None and all_present(cached.version) and all_present(version):
            # Every row present then and now (stored rows are append-only): the projection grows by the
            # rows stored since, O(those rows), where a rebuild reads the whole view (2-3 ms at 45k: a
            # view's batch leaves the projections no task of the batch read to be rebuilt on next use).
            since = distinct_codes(seen.rows[view].slice(cached.version[0]), keep)
            self._grow(state, view, cached, since, shown_before=True)
            return state.projections[(view, tuple(keep))].frame
        rows = seen.present(view)
        assert rows is not None
        frame = in_memory(rows.lazy().select(keep).drop_nulls().unique())
        state.builds += 1
        state.projections[(view, tuple(keep))] = KeptProjection(version, frame, state.builds)
        return frame

    def _few_codes(
        self, state: LinkageState, task: LinkageTask, sets: TaskSets | None, live: Flags | None, step: Step
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
            restricted = self._restrict(relation, pl.Series(live[indices(codes)]), shared)
            if view != delta:
                state.live_rows[(task.key, view)] = (relation, live, restricted)
            filtered[view] = restricted
        return None if any(frame.is_empty() for frame in filtered.values()) else filtered

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

    def _whole_sets(
        self,
        state: LinkageState,
        task: LinkageTask,
        codes: pl.Series,
        shared: SharedWork,
        *,
        step: Step | None = None,
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
                relation = shared.subset(relation, kind, codes, partial(having, relation, task.identifier, codes))
            relations[view] = relation
        size = codes.len().bit_length() // 2
        others = [relation for relation in relations.values() if task.identifier not in relation.columns]
        plan = self._plan(state, task.key, "\0whole", size, others)
        return linked_values(relations, task.identifier, task.sensitive, self.k, shared, plan=plan)
