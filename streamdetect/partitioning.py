"""Splitting a topology's work into units (by identifier value, by check, by pair), so that several
workers share it.

docs/design.md, "What each check's state may be split by": everything linkage decides for an identifier
value e of identifier E (its capped linked sets in every task, their liveness and settling, the certainty
facts, the minimal channel) depends only on the rows holding e in the views that hold E and on the
whole of the other views, because the natural join equates E across the views holding it. So the work
splits into *units*: one per identifier E and value bucket b (the unit sees the rows of views holding E
whose E value falls in bucket b, and every row of the other views) running linkage restricted to E.
The union of the units' findings is the findings of one Detector over all rows (property-tested,
tests/property/test_partition_agreement.py).

The other checks split by what their findings depend on (``CheckProperties.partition``). k-anonymity by
views (without effective functional dependencies) finds each (identifier, sensitive) pair's covers as
it would over a table declaring that pair alone, so each pair is a unit of its own. SIND and RSIND decide
each sensitive attribute's classes on their own (the other sensitive attributes stay in the rows as
public values of a view), so each attribute is a unit running the check narrowed to it. The rest (table
k-anonymity, l-diversity; k-anonymity with dependencies) run whole, each check a unit of its own. Every
such unit sees every row; a unit reads the table only when one of its checks does.

Splitting by identifier comes first: measured on BP, one Detector per identifier costs what one Detector
for both costs (28.6 s against 30.5 s of CPU for the 271,332 rows in 1,000-row batches), so two workers
each get a share of it, while splitting one identifier's values in two left each half costing nearly
the whole (27 s each): the views without the identifier, which every bucket sees whole, carry most of
the work. Buckets come in only when the other units leave partitions free.

Values are placed by CRC-32 of their text (polars' cast to string: decimal integers, ISO dates), not by
polars' own hash, which its documentation says may change between versions: a value must land in the
same partition after an upgrade, or its rows would meet a state that has never seen them.

Pure: no I/O. Cost of :meth:`Plan.rows_for`: O(rows) plus one CRC per distinct identifier value of the batch.
"""

from __future__ import annotations

import dataclasses
import itertools
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import polars as pl

from streamdetect.check_plan import CheckPlan, plan_checks
from streamdetect.detector import Detector
from streamdetect.errors import TopologyError
from streamdetect.model.batch import Batch
from streamdetect.model.topology import Topology


@dataclass(frozen=True)
class Unit:
    """A share of the work: the values of identifier ``identifier`` in value bucket ``bucket`` for the
    checks split by identifier value (``check`` None); or one check (``check``) in a piece of its own:
    for one (``identifier``, ``sensitive``) pair when it splits by pair, for one ``sensitive`` attribute
    (no identifier) when it splits by sensitive attribute, else whole."""

    identifier: str | None = None
    bucket: int = 0
    check: str | None = None
    sensitive: str | None = None

    @property
    def by_value(self) -> bool:
        """Whether the unit holds an identifier's value bucket (of the checks split by value)."""
        return self.check is None

    @property
    def name(self) -> str:
        """A key prefix, never a value: ``<identifier>/<bucket>`` for a value bucket, ``#<check>`` for a
        check whole, ``#<check>/<identifier>/<sensitive>`` for a check's pair, ``#<check>/<sensitive>`` for
        a check's sensitive attribute."""
        if self.check is None:
            return f"{self.identifier}/{self.bucket}"
        if self.identifier is not None:
            return f"#{self.check}/{self.identifier}/{self.sensitive}"
        return f"#{self.check}" if self.sensitive is None else f"#{self.check}/{self.sensitive}"


#: The unit of every whole-state check in the first layout (one unit at partition 0): a state table with
#: entries under it was written by a worker of that layout (:meth:`Plan.stale_prefixes`).
FIRST_LAYOUT_WHOLE = "*"


@dataclass(frozen=True)
class Plan:
    """How a topology's checks split over ``partitions`` partitions.

    The units, in order: one per identifier and value bucket for the checks split by value (``split``);
    one per (identifier, sensitive) pair for each check split by pair (``by_pair``), sensitive attribute
    by sensitive attribute; one per sensitive attribute for each check split by attribute
    (``by_sensitive``); one per other check (``whole``). Unit i lives in partition i mod ``partitions``.
    Value buckets come in only when the other units leave partitions free: ``buckets`` = ceil(free
    partitions / identifiers), at least one (a bucket still sees the views without its identifier whole,
    so it costs nearly what the identifier costs). A record of any view goes to every partition; each
    unit takes its share."""

    topology: Topology
    partitions: int
    #: Checks split by identifier value (linkage), by pair (k-anonymity without functional
    #: dependencies), and those kept whole, each in a unit of its own.
    split: tuple[str, ...]
    whole: tuple[str, ...]
    by_pair: tuple[str, ...] = ()
    #: Checks split by sensitive attribute (SIND, RSIND).
    by_sensitive: tuple[str, ...] = ()
    #: The threshold overriding every check's, as the Detector takes it.
    k: int | None = None

    @property
    def checks(self) -> tuple[str, ...]:
        """Every check the plan runs."""
        return (*self.split, *self.by_pair, *self.by_sensitive, *self.whole)

    @cached_property
    def _others(self) -> list[Unit]:
        """The units besides the value buckets: each pair of the checks split by pair, each sensitive
        attribute of those split by attribute, then each whole check."""
        table = self.topology.table
        # Sensitive-major: a pair's cost follows how far its sensitive attribute's views join more than
        # its identifier (on BP 33-36 s of CPU for either identifier with Health Condition, 9-11 s with
        # Password), so the pairs of one sensitive attribute go to consecutive partitions.
        pairs = [
            Unit(e, check=c, sensitive=s) for c in self.by_pair for s in table.sensitive for e in table.identifiers
        ]
        attributes = [Unit(check=c, sensitive=s) for c in self.by_sensitive for s in table.sensitive]
        return [*pairs, *attributes, *(Unit(check=c) for c in self.whole)]

    @property
    def buckets(self) -> int:
        """Value buckets per identifier."""
        identifiers = len(self.topology.table.identifiers) if self.split else 0
        free = self.partitions - len(self._others)
        return max(1, -(-free // identifiers)) if identifiers else 1

    def units(self) -> list[Unit]:
        """Every unit, in order (the class docstring)."""
        return list(self._placed)

    @cached_property
    def _placed(self) -> dict[Unit, int]:
        identifiers = self.topology.table.identifiers if self.split else ()
        found = [Unit(e, b) for e in identifiers for b in range(self.buckets)]
        placed = {unit: index % self.partitions for index, unit in enumerate([*found, *self._others])}
        names = sorted(f"{unit.name}/" for unit in placed)
        for first, second in itertools.pairwise(names):
            if second.startswith(first):  # one unit's keys would read as another's
                raise TopologyError(
                    f"the units {first[:-1]!r} and {second[:-1]!r} of the partition plan would share state "
                    "keys: rename the identifier attribute",
                    file=self.topology.path,
                )
        return placed

    def partition_of(self, unit: Unit) -> int:
        """The partition a unit lives in."""
        return self._placed[unit]

    def units_in(self, partition: int) -> list[Unit]:
        """The units of one partition (none for a partition beyond the units' count)."""
        return [unit for unit, placed in self._placed.items() if placed == partition]

    def topology_of(self, unit: Unit) -> tuple[Topology, tuple[str, ...]]:
        """The topology and checks a unit's Detector runs: for a value bucket the split checks with its
        identifier as the only one (the others stay attributes); for a pair its check with that pair's
        roles alone; for a whole check or a sensitive attribute's unit that check (narrowed by
        :meth:`check_plan`)."""
        if unit.identifier is None:
            assert unit.check is not None, "a unit without an identifier is a check's, whole or narrowed"
            return self.topology, (unit.check,)
        table = dataclasses.replace(self.topology.table, identifiers=(unit.identifier,))
        if unit.check is None:
            return dataclasses.replace(self.topology, table=table), self.split
        assert unit.sensitive is not None, "a check's unit with an identifier is a pair's"
        table = dataclasses.replace(table, sensitive=(unit.sensitive,))
        return dataclasses.replace(self.topology, table=table), (unit.check,)

    def check_plan(self, unit: Unit) -> CheckPlan:
        """The checks the unit's Detector runs, built (``Detector(topology, plan=...)``): those of
        :meth:`topology_of`, a check split by sensitive attribute narrowed to the unit's."""
        topology, checks = self.topology_of(unit)
        planned = plan_checks(topology, checks, k=self.k)
        if unit.identifier is not None or unit.sensitive is None:  # a value bucket, a pair, a whole check
            return planned
        assert unit.check is not None
        return planned.narrowed(unit.check, unit.sensitive)

    def detector(self, unit: Unit) -> Detector:
        """A Detector of the unit's checks, over its topology, with no rows."""
        planned = self.check_plan(unit)
        return Detector(planned.topology, plan=planned)

    @cached_property
    def _table_readers(self) -> frozenset[Unit]:
        return frozenset(unit for unit in self._placed if self.check_plan(unit).needs_table)

    def reads_table(self, unit: Unit) -> bool:
        """Whether the unit runs a check that reads the private table."""
        return unit in self._table_readers

    def stale_prefixes(self) -> tuple[str, ...]:
        """Key prefixes of a state table written under an earlier layout that this plan does not read:
        the first layout's whole unit, when this plan has units of their own for those checks."""
        return (f"{FIRST_LAYOUT_WHOLE}/",) if self._others else ()

    def rows_for(self, unit: Unit, view: str | None, rows: pl.DataFrame) -> pl.DataFrame:
        """The rows of ``view`` (None: of the private table) the unit must see: those whose identifier value
        falls in its bucket when the view holds its identifier and values are bucketed, else all of them;
        the table's rows only where a check reads them."""
        if view is None:
            return rows if self.reads_table(unit) else rows.clear()
        identifier = unit.identifier
        if not unit.by_value or self.buckets == 1 or identifier not in self.topology.view(view).attributes:
            return rows
        return rows.filter(value_partitions(rows.get_column(identifier), self.buckets) == unit.bucket)

    def route(self, view: str | None, rows: pl.DataFrame) -> dict[Unit, pl.DataFrame]:
        """The rows of ``view`` each unit must see (units that see none are left out)."""
        shares = {unit: self.rows_for(unit, view, rows) for unit in self._placed}
        return {unit: share for unit, share in shares.items() if share.height}

    def split_batch(self, batch: Batch) -> dict[Unit, Batch]:
        """The batch each unit folds, as the worker's records of ``batch`` would reach it (units that
        receive nothing left out): views' rows and withdrawals by :meth:`route`, the table's to the units
        whose checks read it (:meth:`reads_table`), even when it has no rows (an empty table is seen)."""
        parts: dict[Unit, tuple[dict[str, pl.DataFrame], dict[str, pl.DataFrame]]] = {}
        for position, frames in enumerate((batch.views, batch.retracted)):
            for view, rows in frames.items():
                for unit, share in self.route(view, rows).items():
                    parts.setdefault(unit, ({}, {}))[position][view] = share
        out = {unit: Batch(views=views, retracted=retracted) for unit, (views, retracted) in parts.items()}
        if batch.table is not None or batch.retracted_table is not None:
            for unit in self._table_readers:
                part = out.get(unit, Batch())
                out[unit] = Batch(part.views, batch.table, part.retracted, batch.retracted_table)
        return out


def plan(topology: Topology, partitions: int, checks: Sequence[str] | None = None, k: int | None = None) -> Plan:
    """Split ``topology``'s checks (``checks``, default the topology's; ``k`` overriding every threshold)
    over ``partitions`` partitions. Raises :class:`~streamdetect.errors.TopologyError` as the Detector
    does for unknown checks, and when two units' state keys would overlap."""
    if partitions < 1:
        raise ValueError("partitions must be at least 1")
    planned = plan_checks(topology, checks, k=k)
    split = Plan(topology, partitions, planned.split, planned.whole, planned.by_pair, planned.by_sensitive, k)
    split.units()  # refuse overlapping units now, not at a partition's first record
    return split


def value_partitions(values: pl.Series, partitions: int) -> pl.Series:
    """The partition of each value: CRC-32 of its text modulo ``partitions`` (nulls go where ``""`` goes).
    Stable across processes, machines and polars versions (module docstring). O(n) plus one CRC per
    distinct value."""
    text = values.cast(pl.String).fill_null("")
    distinct = text.unique().to_list()
    places = {value: zlib.crc32(value.encode()) % partitions for value in distinct}
    return text.replace_strict(places, return_dtype=pl.UInt32)
