"""The Faust worker: view topics in, findings and dead letters out, the Detector's state in a Faust table.

Every record goes through :class:`~streamdetect.stream.service.DetectorService`: a dead letter is produced
to the dead-letter topic (the record's value and headers, with the reason and detail as headers); a
publication is folded into the Detector, its raised and cleared findings go to the findings topic keyed
by finding id, and the state pieces it wrote go to a table whose changelog topic restores a replacement
worker. A replayed record (same batch id) changes nothing.

Two shapes, by the number of partitions the work is split into (``--partitions``):

* **1** (the default): one agent reads every view topic and folds each record into one Detector, whose
  state is the table ``state``. The view topics must have one partition: one worker holds it all.
* **P > 1**: the work is split into units, one per identifier and value bucket
  (:mod:`streamdetect.partitioning`), spread over the P partitions of the route topic. Agent
  ``split_records`` reads the view topics (any partition count), dead-letters what cannot be read and
  forwards each record to every partition holding a unit (:class:`~streamdetect.stream.routing.Router`);
  agent ``detect`` reads the route topic and folds each record into the units of its partition, each its
  share of the rows (:class:`~streamdetect.stream.routing.Units`), their state in the table ``units``,
  co-partitioned with the route topic (Faust writes a table entry to the partition of the record being
  processed). Kafka's consumer group shares the partitions of both topics among the workers of the
  application; a worker that gets a route partition rebuilds its units from the table's changelog, one
  that loses it forgets them. This is Faust's repartitioning (a topic between two agents, as
  ``group_by`` makes), with the partitions chosen by the plan rather than by Kafka's hash of a key.
"""

from __future__ import annotations

import logging
import re

import faust

from streamdetect.check_plan import plan_checks
from streamdetect.checks.registry import REGISTRY
from streamdetect.detector import Detector
from streamdetect.errors import TopologyError
from streamdetect.model.topology import Topology
from streamdetect.partitioning import plan
from streamdetect.relational.universal_stream import UniversalStream
from streamdetect.stream.records import FINDINGS_MAX_BYTES
from streamdetect.stream.routing import Units
from streamdetect.stream.sensor import WorkerSensor
from streamdetect.stream.service import DetectorService
from streamdetect.stream.settings import WorkerSettings
from streamdetect.stream.worker import fetching
from streamdetect.stream.worker.one_stage import one_stage
from streamdetect.stream.worker.outputs import (
    BATCH_BYTES,
    REFUSED,
    Outputs,
)
from streamdetect.stream.worker.two_stages import two_stages

log = logging.getLogger(__name__)


_ILLEGAL = re.compile(r"[^A-Za-z0-9._-]")


def app_id(topology: Topology) -> str:
    """The Faust application (consumer group, changelog topic prefix) of a topology."""
    return f"streamdetect-{_ILLEGAL.sub('_', topology.name)}"


#: The RocksDB store's settings (``--store rocksdb://``): the state is read whole once, at a restore, and
#: then only written, so caches hardly help; Faust's defaults (a 2 GiB block cache, three 64 MiB write
#: buffers) would let RocksDB hold as much memory as the state it takes out of the process.
ROCKSDB_OPTIONS = {"block_cache_size": 8 << 20, "write_buffer_size": 16 << 20, "max_write_buffer_number": 2}


def state_table(partitions: int) -> str:
    """The name of the worker's state table: ``state`` with one partition, ``units`` with more (another
    changelog topic, as its keys differ)."""
    return "state" if partitions == 1 else "units"


def build_app(topology: Topology, settings: WorkerSettings, metrics: WorkerSensor | None = None) -> faust.App:
    """The worker's Faust application for ``topology``, run as ``settings`` say (:class:`WorkerSettings`),
    in the shape their partitions give (module docstring). ``metrics`` counts what every record led to (a
    :class:`~streamdetect.stream.metrics.WorkerMetrics`, served by the caller; None: the silent
    :class:`~streamdetect.stream.sensor.WorkerSensor`). The universal-relation stream follows the closure
    of a check that keeps the views' rows (a registration's ``keeps_rows``), so the topology must run one.
    Checks the settings against the topology before anything is created on the broker."""
    partitions, checks, max_bytes = settings.partitions, settings.checks, settings.max_bytes
    universal_rows, bootstrap = settings.universal_rows, settings.bootstrap
    brokers = [f"kafka://{address.strip()}" for address in bootstrap.split(",") if address.strip()]
    app = faust.App(
        app_id(topology),
        broker=brokers,
        broker_credentials=settings.security.faust_credentials(),
        store=settings.store,
        datadir=str(settings.datadir),
        web_enabled=settings.web_port is not None,
        web_host="127.0.0.1",
        web_port=settings.web_port or 6066,
        topic_partitions=partitions,
        consumer_auto_offset_reset="earliest",
        # No standby copies of the state: measured here, a standby's changelog records could stall Faust's
        # fetcher after a rebalance for good (both workers idle, lag frozen; as robinhood/faust#583
        # describes). A worker taking a partition over reads its changelog from the start instead, as the
        # memory store does after any restart.
        table_standby_replicas=0,
        broker_session_timeout=settings.session_timeout_s,
        broker_heartbeat_interval=min(3.0, settings.session_timeout_s / 3),
        producer_acks=-1,
        # Finding events can be large (a SIND class lists its members): up to the findings topic's limit.
        producer_max_request_size=max(max_bytes, FINDINGS_MAX_BYTES) + 64 * 1024,
        producer_max_batch_size=BATCH_BYTES,
        consumer_max_fetch_size=max(max_bytes + 64 * 1024, 4_194_304),
    )
    fetching.install(app)  # fetches held at most 100 ms at the broker (Faust's driver: 1.5 s)
    # bytes keys and values: Faust then writes and recovers the changelog raw (other types go through JSON).
    table = app.Table(
        state_table(partitions),
        default=None,
        partitions=partitions,
        key_type=bytes,
        value_type=bytes,
        options=dict(ROCKSDB_OPTIONS) if settings.store.startswith("rocksdb:") else None,  # the store takes them
    )
    out = Outputs(app, topology, table, metrics or WorkerSensor())
    planned = plan_checks(topology, checks)
    keepers = [name for name, registration in REGISTRY.items() if registration.keeps_rows]
    if universal_rows and not set(keepers) & set(planned.names):
        raise TopologyError(
            f"the universal-relation stream (--universal-rows) follows the {' or '.join(keepers)} check's "
            f"closure, and this topology does not run {' or '.join(keepers)}",
            file=topology.path,
            key="checks",
        )
    if partitions == 1:
        universal = UniversalStream(topology, universal_rows) if universal_rows else None
        service = DetectorService(
            topology,
            checks,
            max_bytes,
            universal=universal,
            compact_bytes=settings.compact_bytes,
            replay_retention_s=settings.replay_retention_s,
            defer_compaction=True,  # snapshots in idle time (one_stage), not on the records' path
        )
        one_stage(
            app,
            topology,
            out,
            service,
            coalesce=settings.coalesce,
            wait_s=settings.coalesce_wait_s,
            bootstrap=bootstrap,
        )
        examined = service.detector
    else:
        units = Units(
            plan(topology, partitions, checks),
            out.entries,
            universal_rows,
            compact_bytes=settings.compact_bytes,
            replay_retention_s=settings.replay_retention_s,
        )
        # The open-findings gauge follows the units this worker holds: restored, and given away.
        units.on_restored, units.on_revoked = out.metrics.reopened, out.metrics.reset_open
        two_stages(
            app,
            topology,
            out,
            units,
            max_bytes,
            coalesce=settings.coalesce,
            wait_s=settings.coalesce_wait_s,
            bootstrap=bootstrap,
        )
        examined = Detector(topology, plan=planned)  # what the checks examine as `check` counts it
    out.metrics.examined(examined.summaries({}), planned.table_readers)
    return app


def run_worker(app: faust.App, loglevel: str = "warn") -> None:
    """Run the worker until SIGINT or SIGTERM (then it stops cleanly, committing what it processed).
    Raises :class:`StateError` when it stopped because its state table was written under another
    topology, other checks, thresholds or partition count."""
    from faust.worker import Worker  # noqa: PLC0415 (imports the event loop machinery only to run)

    if loglevel != "debug":
        # kafka-python logs every connection of the offset look-ups (tail checks, idle seeks: one admin
        # client every few seconds while idle) at INFO: ten lines a look-up, none of them news.
        logging.getLogger("kafka").setLevel(logging.WARNING)
    worker = Worker(app, loglevel=loglevel, quiet=True)
    if not worker.stdout.isatty():
        # Faust's start-up spinner writes terminal escape codes (hide the cursor, back-space): on a log
        # file or a pipe they are noise. Without it, Faust logs "Ready" at INFO.
        worker.spinner = None
    try:
        worker.execute_from_commandline()
    except SystemExit:
        refused = REFUSED.pop(id(app), None)
        if refused is not None:
            raise refused from None
        raise
