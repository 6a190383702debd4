"""Which k-anonymity method a topology calls for (Yao, Wang & Jajodia 2005), as one check object.

- no effective FD, projection-only: the exact join-based association covers, incremental
  (:mod:`streamdetect.checks.k_anonymity.association_covers`);
- no effective FD, selections: the exact cell procedure of Figure 5 (:mod:`.selection_covers`);
- the identifier is the key with one join path to P (6.3.1): exact (:mod:`.key_covers`);
- other effective FDs: the conservative complete-signature check of section 7, against the private
  table (:mod:`.conservative_covers`);
- the identifier is the key, two views with one selection (6.3.2): exact by matchings (:mod:`.key_matching`);
- other selections together with an effective FD: the conservative check with swap signatures.

The last three are recomputed per batch (:mod:`.recomputed`). Every method is behind one interface
(:mod:`.methods`), chosen there.

:class:`KAnonymity` is the check as the engine and the streaming worker see it (the protocol of
:mod:`streamdetect.checks.protocol`): it asks its method for the covers, each with a minimal set of views
that forces it (:mod:`.forcing_views`), never which method it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from streamdetect.checks.findings import AssociationCoverFinding, Delta
from streamdetect.checks.k_anonymity.methods import KAnonymityState, Method, choose_method
from streamdetect.checks.presentation import Section, Shown, association_cells, values_text
from streamdetect.checks.protocol import BY_PAIR, WHOLE, CheckProperties, CheckSummary, ProgressFactory
from streamdetect.model.batch import Batch
from streamdetect.model.codecs import Encoded
from streamdetect.model.topology import Topology


@dataclass(frozen=True)
class KAnonymity:
    """k-anonymity by views (Yao, Wang & Jajodia 2005) behind the check protocol; ``k`` overrides."""

    topology: Topology
    k_override: int | None = None
    name = "k-anonymity"

    @classmethod
    def from_topology(cls, topology: Topology, k: int | None = None, max_level: int | None = None) -> KAnonymity:
        """The check as the topology configures it, ``k`` overriding (the join of all views: no closure
        levels)."""
        del max_level
        return cls(topology, k)

    @cached_property
    def method(self) -> Method:
        """The method the topology's subcase calls for (module docstring)."""
        return choose_method(self.topology, self.k_override)

    @property
    def k(self) -> int:
        """The threshold."""
        return self.topology.threshold(self.name, self.k_override)

    @property
    def properties(self) -> CheckProperties:
        """Needs the table for the FD method of section 7 (conservative: its findings say so); splits by
        (identifier, sensitive) pair where the method is chosen and run per pair."""
        reads_table = self.method.reads_table
        return CheckProperties(
            needs_table=reads_table,
            retractions=True,
            partition=BY_PAIR if self.method.per_pair else WHOLE,
            table_reason="with effective functional dependencies it is checked conservatively against the table"
            if reads_table
            else "",
        )

    def initialize(self) -> KAnonymityState:
        """No rows seen."""
        state: KAnonymityState = self.method.initialize()
        return state

    def validate(self, state: KAnonymityState, batch: Batch) -> str | None:
        """A withdrawn row that is not published (the rows are the state's own)."""
        return self.method.validate(state, batch)

    def update(
        self, state: KAnonymityState, batch: Batch, progress: ProgressFactory | None = None
    ) -> Delta[AssociationCoverFinding]:
        """Withdraw and add the batch's rows; return the covers raised and cleared (recomputed from the state)."""
        # The findings of the rows held are cached in the state: the search for forcing views runs once.
        before = self.result(state) if state.findings is not None or self.method.has_rows(state) else []
        self.method.add(state, batch, progress)
        state.findings = None  # the rows changed
        state.log.record(self._logged(batch))
        after = self.result(state)
        return self.method.changes(state, before, after)

    def _logged(self, batch: Batch) -> Batch:
        """What of a batch the state depends on: the views' rows, and the table's when the method reads it."""
        if self.method.reads_table:
            return batch
        return Batch(views=batch.views, retracted=batch.retracted)

    def merge(self, state: KAnonymityState, other: KAnonymityState) -> Delta[AssociationCoverFinding]:
        """Fold another partition's rows in."""
        return self.update(state, self.method.rows(other))

    def result(self, state: KAnonymityState) -> list[AssociationCoverFinding]:
        """Every minimal cover below k, each with a minimal set of views that forces it: kept in the state
        until its rows change (a recomputed method would otherwise find every cover again, e.g. when a
        worker counts the open findings of the units it keeps after a rebalance)."""
        if state.findings is None:
            state.findings = self.method.covers(state)
        return state.findings

    def encode(self, state: KAnonymityState) -> Encoded:
        """The method's state codec."""
        return state.to_parts()

    def decode(self, data: bytes | memoryview) -> KAnonymityState:
        """Inverse of :meth:`encode`."""
        state: KAnonymityState = self.method.decode(data)
        return state

    def changes(self, state: KAnonymityState) -> dict[str, bytes]:
        """The batches taken since the last call (:class:`~streamdetect.checks.batch_log.BatchLog`): the
        covers are recomputed, not append-only, so the log of what arrived is what a write carries."""
        return state.log.take()

    def apply_changes(self, state: KAnonymityState, pieces: Mapping[str, bytes]) -> KAnonymityState:
        """Fold another state's logged batches into ``state``, in order (a gap raises ``ValueError``)."""
        for batch in state.log.replay(pieces):
            self.method.add(state, batch, None)
        state.findings = None
        return state

    def summary(self, findings: int) -> CheckSummary:
        """One "channel" (the join of all views) and one task per (identifier, sensitive) pair."""
        schema = self.topology.table
        return CheckSummary(self.name, self.k, 1, len(schema.identifiers) * len(schema.sensitive), findings)


def section(summary: CheckSummary, findings: Sequence[AssociationCoverFinding], shown: Shown) -> Section:
    """The check's section of a report: one block of the association covers smaller than k."""
    heading = (
        f"k-anonymity (k = {summary.k}): minimal association covers smaller than k, "
        f"{summary.tasks} identifier/sensitive pair(s)"
    )
    if not findings:
        return Section(heading, ())
    columns = ("#", "id", "identifier", "value", "sensitive", "cover", "forced by views", "exact")
    rows = [
        (
            *association_cells(f, shown),
            "{" + values_text(f.sensitive_values) + "}",
            ", ".join(f.views),
            "yes" if f.exact else "no (conservative)",
        )
        for f in findings
    ]
    title = f"association covers (every instance pairs the value with one of these): {len(findings)} finding(s)"
    return Section(heading, (shown.block(title, columns, rows),))
