"""The publisher-side checks (SIND, RSIND) behind the check protocol: they read the private table.

Their state is the table's rows seen (:class:`~streamdetect.checks.indistinguishability.sind.SindState`); a
batch's view rows do not matter to them (the views are computed from the table by definition), its
table rows do. SIND recomputes its classes from the rows per update (a new row can move others' certainty);
RSIND partitions again only the components of its graph an update touches. Each splits by sensitive
attribute: the check narrowed to one attribute reports that attribute's findings, over the same rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from streamdetect.checks.canonical import value_text
from streamdetect.checks.findings import Delta, SindFinding
from streamdetect.checks.indistinguishability.rsind import RsindCheck
from streamdetect.checks.indistinguishability.sind import SindCheck, SindState
from streamdetect.checks.presentation import MEMBERS_SHOWN, Section, Shown
from streamdetect.checks.protocol import BY_SENSITIVE, CheckProperties, CheckSummary, ProgressFactory
from streamdetect.model.batch import Batch
from streamdetect.model.codecs import Encoded
from streamdetect.model.topology import Topology


@dataclass(frozen=True)
class PublisherSide:
    """``sind`` or ``rsind`` over the private table's rows."""

    check: SindCheck | RsindCheck

    @classmethod
    def sind(cls, topology: Topology, k: int | None = None, max_level: int | None = None) -> PublisherSide:
        """k-SIND as the topology configures it (``max_level`` does not apply)."""
        del max_level
        return cls(SindCheck.from_topology(topology, k=k))

    @classmethod
    def rsind(cls, topology: Topology, k: int | None = None, max_level: int | None = None) -> PublisherSide:
        """k-RSIND as the topology configures it (``max_level`` does not apply)."""
        del max_level
        return cls(RsindCheck.from_topology(topology, k=k))

    @property
    def name(self) -> str:
        """``sind`` or ``rsind``."""
        return "sind" if isinstance(self.check, SindCheck) else "rsind"

    @property
    def k(self) -> int:
        """The threshold."""
        return self.check.k

    @property
    def properties(self) -> CheckProperties:
        """Reads the table, takes withdrawals; splits by sensitive attribute (:meth:`narrowed`)."""
        return CheckProperties(needs_table=True, retractions=True, partition=BY_SENSITIVE)

    def narrowed(self, sensitive: str) -> PublisherSide:
        """The check reporting on ``sensitive`` alone. A class of P (and a certainty, a CSIND clique) is
        decided from the rows, every view projecting P and P's domain; the other sensitive attributes stay
        in the rows as public values of a view, so the narrowed check keeps them and finds P's findings
        exactly as the whole check does."""
        return PublisherSide(replace(self.check, examined=(sensitive,)))

    def validate(self, state: SindState, batch: Batch) -> str | None:
        """A withdrawn table row that is not kept, or rows whose public values repeat (SIND) (withdrawn view
        rows do not matter here)."""
        if batch.table is None and batch.retracted_table is None:
            return None
        try:
            rows = state.folded(batch.table, batch.retracted_table, [*self.check.public, *self.check.sensitive])
        except ValueError as exc:
            return str(exc)
        if isinstance(self.check, SindCheck):
            return self.check.refusal_after(state, rows, batch.table, batch.retracted_table)
        return self.check.refusal(rows)

    def initialize(self) -> SindState:
        """No rows seen."""
        return SindState()

    def update(self, state: SindState, batch: Batch, progress: ProgressFactory | None = None) -> Delta[SindFinding]:
        """Withdraw and add the batch's table rows; views' rows are ignored (the views are computed from the
        table)."""
        del progress
        withdrawn = batch.retracted_table
        if (batch.table is None or batch.table.is_empty()) and (withdrawn is None or withdrawn.is_empty()):
            return Delta((), ())
        delta = self.check.update(state, batch.table, withdrawn)
        state.log.record(Batch(table=batch.table, retracted_table=withdrawn))
        return Delta[SindFinding](delta.raised, delta.cleared)

    def merge(self, state: SindState, other: SindState) -> Delta[SindFinding]:
        """Fold another partition's table rows in (the union of the two bags)."""
        if other.rows is None:
            return Delta((), ())
        return self.update(state, Batch(table=other.rows))

    def result(self, state: SindState) -> list[SindFinding]:
        """Every class that does not protect its members."""
        return list(self.check.result(state)) if state.rows is not None else []

    def encode(self, state: SindState) -> Encoded:
        """The state's codec."""
        return state.to_parts()

    def decode(self, data: bytes | memoryview) -> SindState:
        """Inverse of :meth:`encode`."""
        return SindState.from_bytes(data)

    def changes(self, state: SindState) -> dict[str, bytes]:
        """The table rows taken since the last call (:class:`~streamdetect.checks.batch_log.BatchLog`): the
        classes are recomputed, so the log of what arrived is what a write carries."""
        return state.log.take()

    def apply_changes(self, state: SindState, pieces: Mapping[str, bytes]) -> SindState:
        """Fold another state's logged table rows into ``state``, in order (a gap raises ``ValueError``)."""
        columns = [*self.check.public, *self.check.sensitive]
        for batch in state.log.replay(pieces):
            state.rows = state.folded(batch.table, batch.retracted_table, columns)
        state.findings = None
        state.cache = None
        state.partitions.clear()
        return state

    def summary(self, findings: int) -> CheckSummary:
        """Views and sensitive attributes examined."""
        return CheckSummary(self.name, self.k, len(self.check.views), len(self.check.examining), findings)


def section(summary: CheckSummary, findings: Sequence[SindFinding], shown: Shown) -> Section:
    """The check's section of a report: one block of the classes that do not protect their members."""
    heading = (
        f"{summary.name} (k = {summary.k}): classes of indistinguishable public tuples, "
        f"{summary.tasks} sensitive attribute(s)"
    )
    if not findings:
        return Section(heading, ())
    columns = ("#", "id", "sensitive", "members", "why", "exact")
    rows = []
    for f in findings:
        listed = [
            ", ".join(f"{name}={value_text(value)}" for name, value in member) for member in f.members[:MEMBERS_SHOWN]
        ]
        more = f" (+{len(f.members) - MEMBERS_SHOWN} more)" if len(f.members) > MEMBERS_SHOWN else ""
        rows.append(
            (
                shown.number(f),
                shown.marked_id(f),
                f.sensitive_attribute,
                "; ".join(listed) + more,
                f.reason,
                "yes" if f.exact else "no (conservative)",
            )
        )
    title = f"classes that do not protect their members: {len(findings)} finding(s)"
    return Section(heading, (shown.block(title, columns, rows),))
