"""Liveness and saturation: which identifier values a linkage task keeps exact sets for (those
saturated in every sub-channel with no selection to prove), and the masks of the values that reached k.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl

from streamdetect.checks.linkage.frames import (
    same_reads,
)
from streamdetect.checks.linkage.state import (
    CodeFlags,
    Flags,
    LinkageState,
    TaskKey,
    TaskSets,
    Unsaturated,
    rows_where,
    where,
)
from streamdetect.checks.linkage.tasks import LinkageTask, _Tasks
from streamdetect.relational.linked_values import appended


class _Saturation(_Tasks):
    """Live values and saturation masks."""

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
        if cached is not None and same_reads(cached[0], read):
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
                frame = appended(frame, self._drop_saturated(state, sets, identifier, kept.frame.slice(cached.rows)))
        else:
            frame = self._drop_saturated(state, sets, identifier, relation)
        sets.filtered[view] = Unsaturated(kept.build, kept.frame.height, sets.saturated.height, frame)
        return frame
