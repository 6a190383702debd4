"""The linkage check behind the check protocol."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import polars as pl

from streamdetect.checks.findings import Delta, LinkageFinding
from streamdetect.checks.linkage.check import LinkageCheck
from streamdetect.checks.linkage.state import (
    LinkageState,
)
from streamdetect.checks.protocol import BY_IDENTIFIER_VALUE, CheckProperties, CheckSummary, ProgressFactory
from streamdetect.model.batch import Batch
from streamdetect.model.codecs import Encoded
from streamdetect.model.topology import Topology


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
    properties = CheckProperties(needs_table=False, retractions=True, partition=BY_IDENTIFIER_VALUE)

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
        callback = search = None
        if progress is not None:
            tasks = self.check.tasks
            callback = progress(self.name, sum(1 for view in batch.views for t in tasks if view in t.channel.views))
            if not self.check.complete:
                search = progress(f"{self.name} above level {len(self.check.levels)}", 0)
        return self.check.update(state, batch.views, callback, batch.retracted, search)

    def merge(self, state: LinkageState, other: LinkageState) -> Delta[LinkageFinding]:
        """Fold another partition's state in."""
        return self.check.merge(state, other)

    def result(self, state: LinkageState) -> list[LinkageFinding]:
        """Every disclosure, in report order."""
        return self.check.result(state)

    def present_rows(self, state: LinkageState) -> dict[str, pl.DataFrame]:
        """The views' rows present, as the state keeps them (bags)."""
        return state.seen.decoded()

    def result_without(self, state: LinkageState, views: frozenset[str]) -> list[LinkageFinding]:
        """The findings as if ``views`` were never published: the channels holding none of them are the
        closure of the other views, so their tasks' sets are reused (and over many views, the open
        findings: :meth:`LinkageCheck.result_withheld`)."""
        return self.check.result_withheld(state, views)

    def encode(self, state: LinkageState) -> Encoded:
        """The state's codec."""
        return state.to_parts()

    def decode(self, data: bytes | memoryview) -> LinkageState:
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
