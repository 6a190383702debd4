"""Random histories of additions and withdrawals, for the property tests of incremental checks."""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from typing import Any

Rows = dict[str, list[dict[str, Any]]]


def additions_and_withdrawals(
    rows: Mapping[str, list[dict[str, Any]]], rng: random.Random, *, republish: float = 0.3, at_once: float = 0.1
) -> Iterator[tuple[Rows, Rows, Rows]]:
    """Steps of ``(added, withdrawn, present)``: up to three rows added at random per step, rows present
    withdrawn at random (more often once everything is out, so views empty), some withdrawn rows
    published again later (with probability ``republish``) and some in the same step (``at_once``: a
    batch withdraws before it adds, so the row is present after it, under a new presence), until nothing
    is pending or present. Views are bags: rows repeat, and a withdrawal takes back one occurrence.
    ``present`` is live: the rows present after the step."""
    pending = [(name, row) for name, view_rows in rows.items() for row in view_rows]
    rng.shuffle(pending)
    present: Rows = {name: [] for name in rows}
    while pending or any(present.values()):
        added: Rows = {}
        for _ in range(rng.randint(0, 3)):
            if pending:
                name, row = pending.pop()
                added.setdefault(name, []).append(row)
        withdrawn: Rows = {}
        for name, view_rows in present.items():
            for row in list(view_rows):
                if rng.random() < (0.25 if pending else 0.6):
                    view_rows.remove(row)
                    withdrawn.setdefault(name, []).append(row)
                    chance = rng.random()
                    if chance < at_once:
                        added.setdefault(name, []).append(row)
                    elif chance < at_once + republish:
                        pending.append((name, row))
        for name, view_rows in added.items():
            present[name].extend(view_rows)
        yield added, withdrawn, present
