"""One micro-batch of published rows: what every check, the Detector, the window and the worker pass on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import polars as pl


@dataclass(frozen=True)
class Batch:
    """One micro-batch: new rows per view, and new rows of the private table for publisher-side checks.

    ``retracted`` holds rows withdrawn per view (a corrected release, a consent withdrawal) and
    ``retracted_table`` rows withdrawn from the private table. Views and the table are bags: each withdrawn
    row takes back one occurrence. Withdrawals apply before the batch's new rows (a correction withdraws the
    old rows and publishes the new ones). Checks whose properties do not say ``retractions`` refuse a batch
    that has any.
    """

    views: Mapping[str, pl.DataFrame] = field(default_factory=dict)
    table: pl.DataFrame | None = None
    retracted: Mapping[str, pl.DataFrame] = field(default_factory=dict)
    retracted_table: pl.DataFrame | None = None
    #: When the batch was published (seconds since the epoch; None: not known, as for files). Only a
    #: topology's time window reads it (:mod:`streamdetect.windowing`); checks do not.
    published: float | None = None

    @property
    def retracts(self) -> bool:
        """Whether the batch withdraws any row."""
        table = self.retracted_table is not None and self.retracted_table.height > 0
        return table or any(frame.height for frame in self.retracted.values())
