"""The one-stage worker: one agent reads every view topic (and the table's) and folds each record into
one Detector, whose state is the table ``state``."""

from __future__ import annotations

import asyncio
import logging
import time

import faust

from streamdetect.errors import StateError
from streamdetect.model.topology import Topology
from streamdetect.stream.publish import input_topics
from streamdetect.stream.service import DetectorService, Outcome
from streamdetect.stream.state_log import Source
from streamdetect.stream.worker.catch_up import TAIL_CHECK_S, Skipped, Unstick
from streamdetect.stream.worker.outputs import (
    RAW,
    At,
    Outputs,
)

log = logging.getLogger(__name__)


#: Seconds the one-stage agent must be idle before a due state snapshot is taken (checked as often).
IDLE_SNAPSHOT_S = 0.5


def one_stage(
    app: faust.App,
    topology: Topology,
    out: Outputs,
    service: DetectorService,
    *,
    coalesce: int,
    wait_s: float,
    bootstrap: str,
) -> None:
    topics = input_topics(topology, list(service.detector.checks))
    metrics = out.metrics
    # One fold at a time, the agent's, the idle snapshot's or the tail check's; when the agent last
    # finished one, and when the tail check last compared with the group's commits.
    folding = asyncio.Lock()
    folded_at = [time.monotonic()]
    checked_at = [0.0]
    skipped = Skipped(service, out, topics, bootstrap)
    unstick = Unstick.installed(app, bootstrap, topics, folding)

    @app.agent(app.topic(*topics, **RAW), concurrency=1)
    async def ingest(stream: faust.StreamT[bytes]) -> None:
        # take_events acks the events it yields once the loop's body is done with them: their offsets
        # are committed after their effects are delivered (settle), as one event at a time would be.
        async for events in stream.take_events(coalesce, within=wait_s):  # type: ignore[attr-defined]  # on Stream, not in StreamT
            unstick.touch()
            async with folding:
                if not service.restored and not await restored(service, out):
                    return
                await skipped.before([Source(e.message.topic, e.message.partition, e.message.offset) for e in events])
                began = time.perf_counter()
                items = [(e.value, list(e.message.headers or ()), topics.get(e.message.topic)) for e in events]
                outcomes = service.handle_many(items)
                elapsed = time.perf_counter() - began
                for event, outcome in zip(events, outcomes, strict=True):
                    await out.settle(event, outcome)
                    # Counted once delivered: a finding's latency runs until its event is on the broker.
                    metrics.record(outcome, elapsed)
                metrics.state(service.state_bytes)
                folded_at[0] = time.monotonic()

    @app.timer(interval=TAIL_CHECK_S)  # type: ignore[untyped-decorator]  # faust.App.timer is untyped
    async def catch_up_tails() -> None:
        """Once after each spell of folding, when idle for a whole interval outside any rebalance or
        recovery: view records below the group's committed offsets that the state has not seen (the
        consumer committed past them without delivering them) are read from the broker and folded."""
        if app.rebalancing or getattr(app, "in_recovery", False) or folding.locked():
            return
        if time.monotonic() - folded_at[0] < TAIL_CHECK_S or checked_at[0] >= folded_at[0]:
            return
        if not service.restored and not app.tables.recovery.completed.is_set():  # type: ignore[attr-defined]
            return  # the table is not recovered yet
        async with folding:
            checked_at[0] = folded_at[0]
            # No record yet: what they skipped may be all there is, and the checks' status is not known.
            if not service.restored and not await restored(service, out):
                return
            await skipped.tails(app.conf.id)

    @app.timer(interval=IDLE_SNAPSHOT_S)  # type: ignore[untyped-decorator]  # faust.App.timer is untyped
    async def snapshot_when_idle() -> None:
        """Take a due state snapshot while no record is being folded (DetectorService.idle_compaction_due):
        in the update path it held up every record waiting behind it (measured: p99 detection latency
        1.44-1.47 s with it there, 0.99 s without, at 10,000 rows/s). Its entries go to the table's one
        partition like a record's; records arriving meanwhile wait for the lock, as behind a fold."""
        if not service.restored or app.rebalancing or getattr(app, "in_recovery", False) or folding.locked():
            return
        if time.monotonic() - folded_at[0] < IDLE_SNAPSHOT_S or not service.idle_compaction_due():
            return
        async with folding:
            snapshot = service.compact()
            await out.deliver(snapshot, At(0))
            log.info("state snapshot taken while idle (%d bytes)", snapshot.written_bytes)
            metrics.stored(snapshot)
            metrics.state(service.state_bytes)


async def restored(service: DetectorService, out: Outputs) -> bool:
    """Restore the one-stage worker's service from the table, then say which checks are blind to an
    input (:meth:`DetectorService.status`: events, metric, log) before any record: a worker that has
    seen no table must say so even while nothing arrives. False when the table is refused (the worker
    stops)."""
    try:
        service.restore(out.entries())
    except StateError as refused:
        out.refuse(refused)
        return False
    # The findings open in the restored state are open now: the gauge counts them from here.
    out.metrics.reopened(service.take_restored_open())
    announced = service.status(Outcome(events=service.take_resent()))
    await out.deliver(announced, At(0, "the restored state"))
    out.metrics.status(announced)
    return True
