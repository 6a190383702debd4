"""Splitting a topology's work by identifier and identifier value, so that several workers share it.

docs/design.md, "What each check's state may be split by": everything linkage decides for an identifier
value e of identifier E (its capped linked sets in every task, their liveness and settling, the certainty
facts, the minimal channel) depends only on the rows holding e in the views that hold E and on the
whole of the other views, because the natural join equates E across the views holding it. So the work
splits into *units*: one per identifier E and value bucket b (the unit sees the rows of views holding E
whose E value falls in bucket b, and every row of the other views) running linkage restricted to E.
The union of the units' findings is the findings of one Detector over all rows (property-tested,
tests/property/test_partition_agreement.py). Checks whose state is one piece (k-anonymity by views,
SIND, RSIND: covers, cliques and certainty are global) run in one unit of their own that sees every row.

Splitting by identifier comes first: measured on BP, one Detector per identifier costs what one Detector
for both costs (28.6 s against 30.5 s of CPU for the 271,332 rows in 1,000-row batches), so two workers
each get a share of it, while splitting one identifier's values in two left each half costing nearly
the whole (27 s each): the views without the identifier, which every bucket sees whole, carry most of
the work. Buckets come in only when there are more partitions than identifiers.

Values are placed by CRC-32 of their text (polars' cast to string: decimal integers, ISO dates), not by
polars' own hash, which its documentation says may change between versions: a value must land in the
same partition after an upgrade, or its rows would meet a state that has never seen them.

Pure: no I/O. Cost of :meth:`Plan.rows_for`: O(rows) plus one CRC per distinct identifier value of the batch.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import polars as pl

from streamdetect.check_plan import plan_checks
from streamdetect.model.batch import Batch
from streamdetect.model.topology import Topology


@dataclass(frozen=True)
class Unit:
    """A share of the work: the values of identifier ``identifier`` in value bucket ``bucket``, or
    (``identifier`` None) the checks that need every row in one place."""

    identifier: str | None = None
    bucket: int = 0

    @property
    def name(self) -> str:
        """``<identifier>/<bucket>`` (``*`` for the whole-state checks): a key prefix, never a value."""
        return "*" if self.identifier is None else f"{self.identifier}/{self.bucket}"


@dataclass(frozen=True)
class Plan:
    """How a topology's checks split over ``partitions`` partitions: one unit per identifier and value
    bucket, ``buckets`` = ceil(partitions / identifiers) buckets per identifier (so that every partition
    gets work), unit (E, b) in partition (index of E * buckets + b) mod partitions; the whole unit, if
    any, in partition 0. A record of any view goes to every partition; each unit takes its share."""

    topology: Topology
    partitions: int
    #: Checks split by identifier value (linkage), and those kept whole.
    split: tuple[str, ...]
    whole: tuple[str, ...]

    @property
    def buckets(self) -> int:
        """Value buckets per identifier."""
        identifiers = len(self.topology.table.identifiers) if self.split else 0
        return max(1, -(-self.partitions // identifiers)) if identifiers else 1

    def units(self) -> list[Unit]:
        """Every unit."""
        found = [Unit(e, b) for e in self.topology.table.identifiers if self.split for b in range(self.buckets)]
        return [*found, Unit()] if self.whole else found

    def partition_of(self, unit: Unit) -> int:
        """The partition a unit lives in."""
        if unit.identifier is None:
            return 0
        index = self.topology.table.identifiers.index(unit.identifier)
        return (index * self.buckets + unit.bucket) % self.partitions

    def units_in(self, partition: int) -> list[Unit]:
        """The units of one partition (none for a partition beyond the units' count)."""
        return [unit for unit in self.units() if self.partition_of(unit) == partition]

    def topology_of(self, unit: Unit) -> tuple[Topology, tuple[str, ...]]:
        """The topology and checks a unit's Detector runs: for an identifier's unit the split checks with
        that identifier as the only one (the others stay attributes); for the whole unit the other checks."""
        if unit.identifier is None:
            return self.topology, self.whole
        table = dataclasses.replace(self.topology.table, identifiers=(unit.identifier,))
        return dataclasses.replace(self.topology, table=table), self.split

    @cached_property
    def _whole_reads_table(self) -> bool:
        return bool(self.whole) and plan_checks(self.topology, self.whole).needs_table

    def reads_table(self, unit: Unit) -> bool:
        """Whether the unit runs a check that reads the private table (only the whole unit can: the split
        checks never do)."""
        return unit.identifier is None and self._whole_reads_table

    def rows_for(self, unit: Unit, view: str | None, rows: pl.DataFrame) -> pl.DataFrame:
        """The rows of ``view`` (None: of the private table) the unit must see: those whose identifier value
        falls in its bucket when the view holds its identifier and values are bucketed, else all of them;
        the table's rows only where a check reads them."""
        identifier = unit.identifier
        if view is None:
            return rows if self.reads_table(unit) else rows.clear()
        if identifier is None or self.buckets == 1 or identifier not in self.topology.view(view).attributes:
            return rows
        return rows.filter(value_partitions(rows.get_column(identifier), self.buckets) == unit.bucket)

    def route(self, view: str | None, rows: pl.DataFrame) -> dict[Unit, pl.DataFrame]:
        """The rows of ``view`` each unit must see (units that see none are left out)."""
        shares = {unit: self.rows_for(unit, view, rows) for unit in self.units()}
        return {unit: share for unit, share in shares.items() if share.height}

    def split_batch(self, batch: Batch) -> dict[Unit, Batch]:
        """The batch each unit folds, as the worker's records of ``batch`` would reach it (units that
        receive nothing left out): views' rows and withdrawals by :meth:`route`, the table's to the unit
        whose checks read it (:meth:`reads_table`)."""
        parts: dict[Unit, tuple[dict[str, pl.DataFrame], dict[str, pl.DataFrame]]] = {}
        for position, frames in enumerate((batch.views, batch.retracted)):
            for view, rows in frames.items():
                for unit, share in self.route(view, rows).items():
                    parts.setdefault(unit, ({}, {}))[position][view] = share
        out = {unit: Batch(views=views, retracted=retracted) for unit, (views, retracted) in parts.items()}
        if self.reads_table(Unit()) and (batch.table is not None or batch.retracted_table is not None):
            whole = out.get(Unit(), Batch())
            out[Unit()] = Batch(whole.views, batch.table, whole.retracted, batch.retracted_table)
        return out


def plan(topology: Topology, partitions: int, checks: Sequence[str] | None = None) -> Plan:
    """Split ``topology``'s checks (``checks``, default the topology's) over ``partitions`` partitions.
    Raises :class:`~streamdetect.errors.TopologyError` as the Detector does for unknown checks."""
    if partitions < 1:
        raise ValueError("partitions must be at least 1")
    planned = plan_checks(topology, checks)
    split, whole = planned.split, planned.whole
    return Plan(topology, partitions, split, whole)


def value_partitions(values: pl.Series, partitions: int) -> pl.Series:
    """The partition of each value: CRC-32 of its text modulo ``partitions`` (nulls go where ``""`` goes).
    Stable across processes, machines and polars versions (module docstring). O(n) plus one CRC per
    distinct value."""
    text = values.cast(pl.String).fill_null("")
    distinct = text.unique().to_list()
    places = {value: zlib.crc32(value.encode()) % partitions for value in distinct}
    return text.replace_strict(places, return_dtype=pl.UInt32)
