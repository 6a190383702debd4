"""`streamdetect bench partition`: how the work splits over P partitions, measured in one process.

A 2-core machine cannot show eight workers each doing an eighth, so the split is measured where it is
decided: the partition plan's units (:mod:`streamdetect.partitioning`) each fold their share of the same
micro-batches (what the worker's routing would hand them), beside one Detector folding every row. Per
unit: the CPU seconds of its updates and the peak bytes of its state (its snapshot, read at evenly spaced
batches and at the end); then the largest unit's shares of one Detector's CPU and state, the units'
total CPU against one Detector's (the overhead of splitting), per partition the units' sums (what the
worker holding it folds) and the busiest partition's share, and whether the units' findings together
equal one Detector's. The batches alternate between the Detector and the units, so a drift in the
machine's speed weighs on both alike. CPU is the process's (``time.process_time``: every thread, so
polars' own threads count).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import polars as pl

from streamdetect.bench.incremental import fed_inputs, micro_batches
from streamdetect.detector import Detector
from streamdetect.model.batch import Batch
from streamdetect.model.topology import Topology
from streamdetect.partitioning import Unit, plan

#: State sizes are read at this many evenly spaced batches, and at the end.
SAMPLES = 8


class _Measured:
    """A Detector with its CPU seconds and the largest snapshot read."""

    def __init__(self, detector: Detector) -> None:
        self.detector = detector
        self.cpu_s = 0.0
        self.peak_state_bytes = 0

    def update(self, batch: Batch) -> None:
        began = time.process_time()
        self.detector.update(batch)
        self.cpu_s += time.process_time() - began

    def sample(self) -> None:
        self.peak_state_bytes = max(self.peak_state_bytes, len(self.detector.snapshot()))


def run_partition(
    topology: Topology,
    views: Mapping[str, pl.DataFrame],
    *,
    table: pl.DataFrame | None = None,
    partitions: int,
    batch_rows: int,
    checks: Sequence[str] | None = None,
    k: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Feed ``views`` (and ``table``, the private table's rows, when given) from empty in ``batch_rows``-row
    micro-batches to one Detector and to the units of the ``partitions``-partition plan; return the
    measurements (module docstring). Raises :class:`~streamdetect.errors.TopologyError` for unknown
    checks, as the Detector does."""
    split = plan(topology, partitions, checks, k=k)
    single = _Measured(Detector(topology, checks, k=k))
    units = {unit: _Measured(split.detector(unit)) for unit in split.units()}
    inputs = fed_inputs(views, table)
    batches = micro_batches(inputs, 0, batch_rows)
    every = max(1, len(batches) // SAMPLES)
    for done, batch in enumerate(batches, start=1):
        single.update(batch)
        for unit, share in split.split_batch(batch).items():
            units[unit].update(share)
        if done % every == 0 or done == len(batches):
            for measured in [single, *units.values()]:
                measured.sample()
        if progress is not None:
            progress(done, len(batches))
    if not batches:
        for measured in [single, *units.values()]:
            measured.sample()
    expected = sorted(finding.id for finding in single.detector.findings())
    found = sorted(finding.id for measured in units.values() for finding in measured.detector.findings())
    rows = [_unit_row(unit, split.partition_of(unit), measured) for unit, measured in units.items()]
    largest_cpu = max((row["cpu_s"] for row in rows), default=0.0)
    largest_state = max((row["peak_state_bytes"] for row in rows), default=0)
    held = _partition_rows(rows, partitions)
    busiest = max((row["cpu_s"] for row in held), default=0.0)
    return {
        "topology": topology.name,
        "partitions": partitions,
        "checks": sorted(single.detector.checks),
        "batches": len(batches),
        "batch_rows": batch_rows,
        "rows": sum(frame.height for frame in inputs.values()),
        "single": {"cpu_s": single.cpu_s, "peak_state_bytes": single.peak_state_bytes},
        "units": rows,
        "largest_cpu_share": largest_cpu / single.cpu_s if single.cpu_s else None,
        "largest_state_share": largest_state / single.peak_state_bytes if single.peak_state_bytes else None,
        "total_cpu_ratio": sum(row["cpu_s"] for row in rows) / single.cpu_s if single.cpu_s else None,
        "by_partition": held,
        "largest_partition_cpu_share": busiest / single.cpu_s if single.cpu_s else None,
        "findings_equal": found == expected,
    }


def _partition_rows(rows: list[dict[str, Any]], partitions: int) -> list[dict[str, Any]]:
    """Per partition, what its units cost together: the work of the worker holding that partition (the
    units' peak states summed: an upper bound, as their peaks may fall at different batches)."""
    return [
        {
            "partition": partition,
            "cpu_s": sum(row["cpu_s"] for row in rows if row["partition"] == partition),
            "peak_state_bytes": sum(row["peak_state_bytes"] for row in rows if row["partition"] == partition),
        }
        for partition in range(partitions)
    ]


def _unit_row(unit: Unit, partition: int, measured: _Measured) -> dict[str, Any]:
    return {
        "name": unit.name,
        "partition": partition,
        "cpu_s": measured.cpu_s,
        "peak_state_bytes": measured.peak_state_bytes,
    }
