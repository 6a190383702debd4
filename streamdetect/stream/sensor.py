"""What a worker reports of its work as it goes, as Faust's sensors do: :class:`WorkerSensor` says nothing
(a worker without metrics has it), :class:`~streamdetect.stream.metrics.WorkerMetrics` counts into
Prometheus. The worker calls one sensor, always; it never asks whether there is one."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamdetect.stream.records import Publication
    from streamdetect.stream.service import Outcome


class WorkerSensor:
    """Every event a worker reports, each a no-op here."""

    def examined(self, summaries: Iterable[Any], table_readers: Iterable[str] = ()) -> None:
        """What the checks examine (at the start), and which of them read the private table."""

    def status(self, outcome: Outcome) -> None:
        """An outcome that may report a change of the checks' status (an input seen)."""

    def record(self, outcome: Outcome, seconds: float) -> None:
        """One record read and folded in one place (a worker without a route stage)."""

    def consumed(self, publication: Publication) -> None:
        """A record read from a view topic."""

    def folded(self, outcome: Outcome, seconds: float) -> None:
        """What folding a record (a unit's share of it, with a route stage) led to."""

    def stored(self, outcome: Outcome) -> None:
        """The state entries an outcome wrote."""

    def findings(self, raised: Iterable[Any], cleared: Iterable[Any], published: dt.datetime) -> None:
        """A batch's raised and cleared findings."""

    def reopened(self, findings: Iterable[Any]) -> None:
        """Findings open in a state restored from the table (raised before it was written)."""

    def reset_open(self, findings: Iterable[Any]) -> None:
        """The findings open in the states the worker still holds, after some went to another worker."""

    def state(self, size: int) -> None:
        """The bytes of state the worker holds now."""

    def lag(self, topic: str, partition: int, left: int) -> None:
        """The records left to read in a partition after the one just read."""

    def lag_gone(self, topic: str, partition: int) -> None:
        """A partition taken away: another worker reports its lag now."""
