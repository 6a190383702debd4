"""One update's rows as they enter the linkage joins."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl


@dataclass
class Arrivals:
    """One view's rows entering a batch's joins: rows that became present (``before``: the view's version
    before they did) or withdrawn rows (``before`` None); their projections per attribute set, once."""

    view: str
    rows: pl.DataFrame
    before: tuple[int, int, int] | None
    projected: dict[tuple[str, ...], pl.DataFrame] = field(default_factory=dict)


@dataclass
class Step:
    """The rows one update adds, per view, all stored before any join runs: each view's delta joins the
    rows present of the others *after* the step, so a join of two deltas is found once per delta and kept
    once (the sets are sets). Tasks then take the step one at a time, by level, each with every delta
    its channel holds: one catch-up, one fold and one settling per task and step, not per view."""

    arrivals: dict[str, Arrivals]
    #: Per identifier attribute, its dictionary's size before the step: codes from there on are values
    #: first seen in it (no earlier row holds them).
    first_new: dict[str, int]
