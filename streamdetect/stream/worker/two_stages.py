"""The two-stage worker: agent ``split_records`` routes each view record to the route partitions holding
its units, agent ``detect`` folds the route records into the units of its partitions (table ``units``)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

import faust

from streamdetect.errors import StateError
from streamdetect.model.topology import Topology
from streamdetect.stream.publish import committed_offsets, input_topics
from streamdetect.stream.routing import Router, Units, source_of
from streamdetect.stream.state_log import Source
from streamdetect.stream.topics import route_topic
from streamdetect.stream.worker.catch_up import TAIL_CHECK_S, Gaps, Unstick
from streamdetect.stream.worker.outputs import (
    RAW,
    At,
    Outputs,
    headers_of,
)

log = logging.getLogger(__name__)


def two_stages(
    app: faust.App,
    topology: Topology,
    out: Outputs,
    units: Units,
    max_bytes: int,
    *,
    coalesce: int,
    wait_s: float,
    bootstrap: str,
) -> None:
    split = units.plan
    topics = input_topics(topology, split.checks)
    route = app.topic(route_topic(topology), partitions=split.partitions, **RAW)
    router = Router(split, max_bytes)
    metrics = out.metrics
    # One fold at a time, the agent's or the tail check's; when the agent last finished one.
    folding = asyncio.Lock()
    folded_at = [time.monotonic()]
    unstick = Unstick.installed(app, bootstrap, [*topics, route.get_topic_name()], folding)

    @app.agent(app.topic(*topics, **RAW), concurrency=1)
    async def split_records(stream: faust.StreamT[bytes]) -> None:
        async for event in stream.events():
            unstick.touch()
            message = event.message
            routed = router.handle(
                event.value,
                list(message.headers or ()),
                topics.get(message.topic),
                Source(message.topic, message.partition, message.offset),
            )
            await out.routed(event, routed)
            # Delivered before this record's offset is committed (once the next one is taken); a dead
            # letter's are markers (Router.handle).
            sent = [
                await route.send(key=message.key, value=body, headers=headers, partition=partition)
                for partition, body, headers in routed.records
            ]
            if sent:
                await asyncio.gather(*sent)

    gaps = Gaps(app, out, units, router, topics, bootstrap=bootstrap, topic=route.get_topic_name())

    @app.agent(route, concurrency=1)
    async def detect(stream: faust.StreamT[bytes]) -> None:
        # take_events acks the events it yields once the loop's body is done with them, as in the
        # one-stage worker: their offsets are committed after their effects are delivered.
        async for events in stream.take_events(coalesce, within=wait_s):  # type: ignore[attr-defined]  # on Stream, not in StreamT
            unstick.touch()
            async with folding:
                went_on = await fold_routed(app, out, events, gaps)
                folded_at[0] = time.monotonic()
            if not went_on:
                return

    @app.timer(interval=TAIL_CHECK_S)  # type: ignore[untyped-decorator]  # faust.App.timer is untyped
    async def catch_up_tails() -> None:
        """Fold route records the consumer skipped at the end of a partition: the gap check of
        :func:`fold_routed` sees a skip only when a later record arrives, and a skipped last record has
        none. Once the agent has been idle for a whole interval outside any rebalance or recovery, a
        partition held here whose end (the consumer's highwater) lies past the offset its units expect
        next has records the consumer will not deliver: they are read from the broker and folded."""
        if app.rebalancing or getattr(app, "in_recovery", False) or folding.locked():
            return
        if time.monotonic() - folded_at[0] < TAIL_CHECK_S:
            return
        async with folding:
            try:
                await settle_route_tails(app, out, units, gaps, since=folded_at[0])
            except StateError as refused:
                out.refuse(refused)

    async def forget(sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
        """Partitions taken away: another worker reports their lag now."""
        del sender, signal, kwargs
        for tp in args[0]:
            metrics.lag_gone(tp.topic, tp.partition)

    async def renew(sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
        """Partitions assigned (after every revocation): every unit is rebuilt from the table at its
        partition's next record. Those of partitions taken away are another worker's now; those whose
        partition stayed here go too, as a record taken while the revocation ran could have rebuilt one
        from a table the rebalance then moved on from."""
        del sender, signal, kwargs
        units.revoke(range(split.partitions))
        owned = sorted(tp.partition for tp in args[0] if tp.topic == route.get_topic_name())
        log.info("route partitions %s assigned: their units will be rebuilt from the table", owned)

    app.on_partitions_revoked.connect(forget)
    app.on_partitions_assigned.connect(renew)


async def fold_routed(app: faust.App, out: Outputs, events: Sequence[faust.EventT[bytes]], gaps: Gaps) -> bool:
    """Fold route records into the units of their partitions and deliver what they led to: per partition,
    consecutive records in as few Detector updates as their order allows (:meth:`Units.handle_many`),
    records the consumers skipped folded first where a record's offsets jump. False when the worker must
    stop (its state table was refused)."""
    by_partition: dict[int, list[faust.EventT[bytes]]] = {}
    for event in events:
        by_partition.setdefault(event.message.partition, []).append(event)
    try:
        for partition, taken in by_partition.items():
            await _fold_partition(app, out, gaps, partition, taken)
    except StateError as refused:
        out.refuse(refused)
        return False
    return True


async def _fold_partition(
    app: faust.App, out: Outputs, gaps: Gaps, partition: int, taken: Sequence[faust.EventT[bytes]]
) -> None:
    """:func:`fold_routed` for one partition's records, in order (the rest of them dropped when the
    partition went to another worker meanwhile)."""
    units = gaps.units
    run: list[faust.EventT[bytes]] = []
    expected = units.next_offset(partition)
    sources = units.next_source_offsets(partition)
    for event in taken:
        message = event.message
        headers = headers_of(message)
        source = source_of(headers)
        route_gap = expected is not None and message.offset > expected
        source_gap = source is not None and source.key in sources and source.offset > sources[source.key]
        if route_gap or source_gap:
            # Records in between were not delivered: the run so far first, then those, read directly.
            if not await _fold_run(app, out, units, partition, run):
                return
            run = []
            if route_gap:
                assert expected is not None
                await gaps.fill_route(partition, expected, message.offset)
            await gaps.fill_sources_before(partition, headers)
            sources = units.next_source_offsets(partition)
        run.append(event)
        expected = message.offset + 1
        if source is not None:
            sources[source.key] = max(source.offset + 1, sources.get(source.key, 0))
    await _fold_run(app, out, units, partition, run)


async def _fold_run(
    app: faust.App, out: Outputs, units: Units, partition: int, run: Sequence[faust.EventT[bytes]]
) -> bool:
    """Fold consecutive route records of one partition and deliver what they led to. False when the
    partition went to another worker while this one folded (a rebalance it was late for): writing now
    would put a second writer's entries, numbered as the new owner's, in the unit's changelog, so the
    fold is dropped and the new owner folds the records from the committed offset (Faust discards commits
    of revoked partitions)."""
    if not run:
        return True
    records = [(event.value, headers_of(event.message), event.message.offset) for event in run]
    began = time.perf_counter()
    outcomes = units.handle_many(partition, records)
    elapsed = time.perf_counter() - began
    if run[0].message.tp not in app.consumer.assignment():
        units.revoke([partition])
        log.warning("route partition %d was reassigned while folding: its outcome is dropped", partition)
        return False
    for event, outcome in zip(run, outcomes, strict=True):
        await out.settle(event, outcome)
        if outcome.publication is not None or outcome.dead is not None:
            # Counted once delivered (a dropped fold is the new owner's to count); a marker counts nothing.
            out.metrics.folded(outcome, elapsed)
            out.metrics.state(units.state_bytes)
    return True


async def settle_route_tails(app: faust.App, out: Outputs, units: Units, gaps: Gaps, *, since: float) -> None:
    """For each route partition assigned here: fold the records between the offset its units expect
    next and the partition's end, when the consumer is known to have the end (its highwater). Then, once
    after each spell of folding (``since``: when the last fold ended), for each partition whose route
    records are all folded: the view records its units have not seen below the group's committed offsets
    of the view topics (stage one committed past them: routed, or skipped by its consumer)."""
    caught_up = []
    for tp in sorted(app.consumer.assignment()):
        if tp.topic != gaps.topic:
            continue
        # Before any record: which checks are blind to an input (the units restored from the table).
        announced = units.announce(tp.partition)
        if announced.events:
            await out.deliver(announced, At(tp.partition, gaps.topic))
            out.metrics.status(announced)
        end = app.consumer.highwater(tp)
        if not end:  # not known yet, or an empty partition: nothing can be missing (units not rebuilt)
            continue
        expected = units.next_offset(tp.partition)
        if expected is None:
            continue
        if end > expected:
            await gaps.fill_route(tp.partition, expected, end)
            out.metrics.state(units.state_bytes)
        caught_up.append(tp.partition)
    if not caught_up or gaps.sources_checked >= since:
        return
    gaps.sources_checked = since
    committed = await asyncio.to_thread(committed_offsets, gaps.bootstrap, app.conf.id)
    for partition in caught_up:
        seen = units.next_source_offsets(partition)
        for (topic, number), end in sorted(committed.items()):
            start = seen.get(f"{topic}:{number}", 0)  # none seen: from the start
            if topic in gaps.views and end > start:
                await gaps.fill_source(partition, topic, number, start, end)
