"""``streamdetect bench incremental``: a stream of micro-batches through the Detector, timed per batch.

Loads a prefix of every view (and of the private table, when a check run reads it) in one batch, then
feeds the rest as batches of ``batch_rows`` rows taken round-robin across the views and the table, as a
publication stream would (the table's topic is one more input: its batches take their turn with the
views'); with ``retract`` F, each batch also withdraws F x ``batch_rows`` rows of its input published
earlier (chosen at random, seeded, each at most once). Per batch: the update's latency and the bytes a
changelog would write (:meth:`Detector.changes`: append-only pieces for the linkage check, the batches
themselves for recomputed checks). Rows per second count every row fed, the table's included. Findings
at the end are the open ones, in the report's JSON form.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import polars as pl

from streamdetect.detector import Detector
from streamdetect.model.batch import Batch
from streamdetect.model.topology import Topology

#: An input of the stream: a view's name, or None for the private table.
Input = str | None
#: How the table is labelled in the per-input figures.
TABLE_LABEL = "(table)"


def _batch(name: Input, rows: pl.DataFrame, withdrawn: pl.DataFrame | None = None) -> Batch:
    """A batch of one input's rows (and withdrawn rows)."""
    if name is None:
        return Batch(table=rows, retracted_table=withdrawn)
    return Batch(views={name: rows}, retracted={name: withdrawn} if withdrawn is not None else {})


def _slices(views: Mapping[Input, pl.DataFrame], start: int, batch_rows: int) -> list[tuple[Input, int, int]]:
    """(input, first row, rows) of every micro-batch from ``start``, round-robin across inputs."""
    offsets = dict.fromkeys(views, start)
    slices = []
    while any(offsets[name] < frame.height for name, frame in views.items()):
        for name, frame in views.items():
            if offsets[name] < frame.height:
                slices.append((name, offsets[name], min(batch_rows, frame.height - offsets[name])))
                offsets[name] += batch_rows
    return slices


def fed_inputs(views: Mapping[str, pl.DataFrame], table: pl.DataFrame | None) -> dict[Input, pl.DataFrame]:
    """The inputs a run feeds: the views by name, and the private table under None when it is fed."""
    inputs: dict[Input, pl.DataFrame] = {}
    inputs.update(views)
    if table is not None:
        inputs[None] = table
    return inputs


def micro_batches(views: Mapping[Input, pl.DataFrame], start: int, batch_rows: int) -> list[Batch]:
    """Rows from position ``start`` of every view (and the table, under None), ``batch_rows`` at a time,
    round-robin across them."""
    return [_batch(name, views[name].slice(first, rows)) for name, first, rows in _slices(views, start, batch_rows)]


def with_withdrawals(
    views: Mapping[Input, pl.DataFrame], start: int, batch_rows: int, fraction: float, seed: int = 0
) -> list[Batch]:
    """:func:`micro_batches`, each batch also withdrawing ``fraction`` of its row count of rows of its view
    published before it (the prefix and earlier batches), chosen at random with ``seed``, none twice."""
    rng = random.Random(seed)
    published = {name: list(range(min(start, frame.height))) for name, frame in views.items()}
    batches = []
    for name, first, rows in _slices(views, start, batch_rows):
        available = published[name]
        chosen = []
        for _ in range(min(len(available), round(fraction * rows))):
            # Swap-remove: O(1) per drawn row.
            i = rng.randrange(len(available))
            available[i], available[-1] = available[-1], available[i]
            chosen.append(available.pop())
        withdrawn = views[name][sorted(chosen)] if chosen else None
        batches.append(_batch(name, views[name].slice(first, rows), withdrawn))
        available.extend(range(first, first + rows))
    return batches


def taken_together(batches: Sequence[Batch], together: int) -> list[Batch]:
    """Every ``together`` consecutive batches as one (rows of one view concatenated), as a worker takes the
    records waiting into one update (``worker --coalesce``)."""
    if together <= 1:
        return list(batches)
    merged = []
    for first in range(0, len(batches), together):
        group = batches[first : first + together]
        views: dict[str, list[pl.DataFrame]] = {}
        retracted: dict[str, list[pl.DataFrame]] = {}
        tables = [batch.table for batch in group if batch.table is not None]
        withdrawn = [batch.retracted_table for batch in group if batch.retracted_table is not None]
        for batch in group:
            for name, frame in batch.views.items():
                views.setdefault(name, []).append(frame)
            for name, frame in batch.retracted.items():
                retracted.setdefault(name, []).append(frame)
        merged.append(
            Batch(
                views={name: pl.concat(frames) for name, frames in views.items()},
                retracted={name: pl.concat(frames) for name, frames in retracted.items()},
                table=pl.concat(tables) if tables else None,
                retracted_table=pl.concat(withdrawn) if withdrawn else None,
            )
        )
    return merged


def _percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def run_incremental(
    topology: Topology,
    views: Mapping[str, pl.DataFrame],
    *,
    batch_rows: int,
    prefix: float = 0.5,
    retract: float = 0.0,
    checks: Sequence[str] | None = None,
    k: int | None = None,
    together: int = 1,
    progress: Callable[[int, int], None] | None = None,
    table: pl.DataFrame | None = None,
) -> dict[str, Any]:
    """Feed the stream; return the measurements (docs/benchmarks.md): latency p50/p99/max in ms (and the
    median per input published to), rows per second over the stream, state bytes at the end, bytes
    written per batch, and the open findings. ``together``: that many micro-batches per update
    (:func:`taken_together`; the per-input medians then count an update once per input it holds).
    ``table``: the private table's rows, fed as one more input (for the checks that read it)."""
    detector = Detector(topology, checks, k=k)
    inputs = fed_inputs(views, table)
    start = min(frame.height for frame in inputs.values()) if inputs else 0
    start = int(start * prefix)
    loaded_at = time.perf_counter()
    detector.update(
        Batch(
            views={name: frame.head(start) for name, frame in views.items()},
            table=table.head(start) if table is not None else None,
        )
    )
    detector.changes()  # the prefix's pieces: written once, not counted per batch
    load_s = time.perf_counter() - loaded_at
    batches = taken_together(
        with_withdrawals(inputs, start, batch_rows, retract) if retract else micro_batches(inputs, start, batch_rows),
        together,
    )
    latencies: list[float] = []
    by_view: dict[str, list[float]] = {}
    written: list[int] = []
    rows = withdrawn = table_rows = 0
    for done, batch in enumerate(batches, start=1):
        began = time.perf_counter()
        detector.update(batch)
        latencies.append((time.perf_counter() - began) * 1000)
        # A micro-batch publishes to one input: which inputs' batches are slow.
        for name in [*batch.views, *([TABLE_LABEL] if batch.table is not None else [])]:
            by_view.setdefault(name, []).append(latencies[-1])
        written.append(sum(len(piece) for piece in detector.changes().values()))
        added = batch.table.height if batch.table is not None else 0
        rows += sum(frame.height for frame in batch.views.values()) + added
        table_rows += added
        withdrawn += sum(frame.height for frame in batch.retracted.values())
        withdrawn += batch.retracted_table.height if batch.retracted_table is not None else 0
        if progress is not None:
            progress(done, len(batches))
    total_s = sum(latencies) / 1000
    return {
        "topology": topology.name,
        "prefix_rows": start,
        "load_s": load_s,
        "batches": len(batches),
        "batch_rows": batch_rows,
        "together": together,
        "rows": rows,
        "table_rows": table_rows,
        "withdrawn_rows": withdrawn,
        # Every row the stream carried, published or withdrawn.
        "rows_per_second": (rows + withdrawn) / total_s if total_s else None,
        "batch_ms": {
            "p50": statistics.median(latencies) if latencies else None,
            "p99": _percentile(latencies, 0.99) if latencies else None,
            "max": max(latencies) if latencies else None,
        },
        # Median latency of the batches publishing to each view.
        "batch_ms_by_view": {name: statistics.median(values) for name, values in by_view.items()},
        "state_bytes": len(detector.snapshot()),
        "bytes_per_batch": statistics.median(written) if written else None,
        "findings": [finding.to_dict() for finding in detector.findings()],
        "incomplete": detector.incomplete(),
    }
