"""Records Faust's consumer did not deliver, found and folded. Three faults, each with its own mechanism
and test:

* :class:`Unstick`: a partition whose committed offset stops short of its end while the worker is idle
  (the consumer fetched nothing more, its position stale after a rebalance): sought back to the commit
  (tests/unit/test_worker_unstick.py).
* :class:`Skipped`: the one-stage worker's records skipped between two it folded (an offset jump in a
  view partition, its offsets kept in the state): read from the broker and folded before the next one
  (tests/integration/test_kafka_worker.py, "the consumer skipped").
* :class:`Gaps`: the same for the two-stage worker, over the route topic and the view topics every route
  record names (tests/integration/test_kafka_worker.py, a view record and a route record skipped).

The jump checks see a skip only when a later record arrives; the tail checks (every
:data:`TAIL_CHECK_S` of idleness) compare the folded offsets with the partitions' ends for the last
records of a burst.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import faust

from streamdetect.stream.publish import committed_offsets, read_range
from streamdetect.stream.records import Topic
from streamdetect.stream.routing import Router, Units, source_of
from streamdetect.stream.service import DetectorService, Outcome
from streamdetect.stream.state_log import Source
from streamdetect.stream.worker.outputs import (
    Outputs,
)

log = logging.getLogger(__name__)


#: Seconds the route agent must be idle before the tail check looks for records the consumer skipped.
TAIL_CHECK_S = 5.0


#: Seconds between two seeks back of one partition whose committed offset stops short of its end (:class:`Unstick`).
UNSTICK_S = 30.0


class Unstick:
    """Partitions whose committed offset stops short of their end while the worker is idle: sought back.

    Faust's consumer was seen to leave a partition's committed offset short of the end for good after a
    rebalance, both workers idle (a hole in its acked offsets that its commits never pass: records it
    skipped and never delivers again; docs/streaming.md, "A lag that stops short of zero"). Once
    the agents have been idle for :data:`TAIL_CHECK_S` outside a rebalance or recovery, each partition
    held here whose committed offset (the group's, from the broker) lies below the consumer's end is
    sought back to it, at most once per :data:`UNSTICK_S`: Faust delivers those records again, the agents
    fold or route them (a record folded already is a replay, skipped by batch id) and ack them, and the
    commits move on."""

    def __init__(self, app: faust.App, bootstrap: str, topics: Iterable[str]) -> None:
        self.app = app
        self.bootstrap = bootstrap
        self.topics = set(topics)
        #: When an agent last took a record or the assignment last changed (``time.monotonic``), the
        #: assignment then, and when each partition was sought back.
        self.active_at = time.monotonic()
        self.assigned: frozenset[Any] = frozenset()
        self.sought: dict[Any, float] = {}
        #: The idle clock and the ends of the last look that found every partition at its end: until
        #: either moves, a look would find the same (no broker call every few seconds while idle).
        self.clean: tuple[float, dict[Any, int]] | None = None

    @classmethod
    def installed(cls, app: faust.App, bootstrap: str, topics: Iterable[str], folding: asyncio.Lock) -> Unstick:
        """One for ``app``'s partitions of ``topics``, checked by a timer while ``folding`` is free."""
        unstick = cls(app, bootstrap, topics)

        @app.timer(interval=TAIL_CHECK_S)  # type: ignore[untyped-decorator]  # faust.App.timer is untyped
        async def unstick_partitions() -> None:
            if not folding.locked():
                await unstick.check()

        return unstick

    def touch(self) -> None:
        """An agent took a record now."""
        self.active_at = time.monotonic()

    async def check(self) -> None:
        """Seek back the partitions held here whose committed offset stops short of their end."""
        app = self.app
        if app.rebalancing or getattr(app, "in_recovery", False) or time.monotonic() - self.active_at < TAIL_CHECK_S:
            return
        consumer = app.consumer
        assigned = frozenset(tp for tp in consumer.assignment() if tp.topic in self.topics)
        if assigned != self.assigned:
            # A new assignment restarts the idle clock: a worker just given partitions has its table
            # recovery and first fetches ahead of it, not a stall.
            self.assigned, self.active_at = assigned, time.monotonic()
            return
        ends = {tp: end for tp in assigned if (end := consumer.highwater(tp))}
        looked = (self.active_at, ends)
        if not ends or self.clean == looked:
            return
        committed = await asyncio.to_thread(committed_offsets, self.bootstrap, app.conf.id)
        now = time.monotonic()
        done_at = {tp: committed.get((tp.topic, tp.partition), 0) for tp in ends}
        short = [(tp, end, done_at[tp]) for tp, end in ends.items() if done_at[tp] < end]
        self.clean = None if short else looked
        for tp, end, done in short:
            if now - self.sought.get(tp, -UNSTICK_S) < UNSTICK_S or now - self.active_at < TAIL_CHECK_S:
                continue
            self.sought[tp] = now
            log.warning(
                "%s partition %d: committed offset %d stops short of its end %d while idle; seeking back to it",
                tp.topic,
                tp.partition,
                done,
                end,
            )
            try:
                await consumer.seek(tp, done)
            except Exception as failed:  # a partition taken away meanwhile: the next check
                log.warning("seeking %s partition %d back failed: %s", tp.topic, tp.partition, type(failed).__name__)


@dataclass
class Skipped:
    """View records the one-stage worker's consumer did not deliver, read from the broker and folded.

    The state keeps, per view topic partition, the offset after the last record handled
    (:meth:`DetectorService.note_source`); Faust's consumer was seen to commit past records it never
    delivered (docs/streaming.md), which then show as a jump in a partition's offsets, or, at its end, as
    a committed offset past what the state has seen."""

    service: DetectorService
    out: Outputs
    #: Input topic -> what it carries (a view's name, the table).
    topics: Mapping[str, Topic]
    bootstrap: str

    async def before(self, sources: Sequence[Source]) -> None:
        """Fold what the consumer skipped before the records read at ``sources``, and note those."""
        for source in sources:
            expected = self.service.sources.get(source.key)
            if expected is not None and source.offset > expected:
                await self.fill(source.topic, source.partition, expected, source.offset)
            self.service.note_source(source)

    async def tails(self, group: str) -> None:
        """Fold the records below ``group``'s committed offsets that the state has not seen (of a topic
        partition it has seen nothing of: from its start)."""
        committed = await asyncio.to_thread(committed_offsets, self.bootstrap, group)
        for (topic, partition), end in sorted(committed.items()):
            start = self.service.sources.get(f"{topic}:{partition}", 0)
            if topic in self.topics and end > start:
                await self.fill(topic, partition, start, end)

    async def fill(self, topic: str, partition: int, start: int, end: int) -> None:
        """Fold the records ``start`` to ``end`` (excluded) of ``topic``'s ``partition``, as the agent
        folds records (one folded already is a replay); their dead letters are keyed as the agent's."""
        log.warning(
            "%s partition %d: records %d to %d were not delivered by the consumer; reading them directly",
            topic,
            partition,
            start,
            end - 1,
        )
        missing = await asyncio.to_thread(read_range, self.bootstrap, topic, partition, start=start, end=end)
        for offset, _, _ in missing:
            self.service.note_source(Source(topic, partition, offset))
        began = time.perf_counter()
        outcomes = self.service.handle_many([(value, headers, self.topics.get(topic)) for _, value, headers in missing])
        elapsed = time.perf_counter() - began
        for (offset, value, headers), outcome in zip(missing, outcomes, strict=True):
            await self.out.settle_read(outcome, value, headers, (topic, partition, offset), table_partition=0)
            self.out.metrics.record(outcome, elapsed)


@dataclass
class Gaps:
    """Records the consumers did not deliver, read from the broker and folded (two-stage worker).

    Faust's consumer was seen to skip records around a rebalance: offsets committed past a record never
    delivered (its stale acks, as faust-streaming issues 216 and 312 describe). The units' state keeps
    the offsets they have folded, so a skip shows as a jump: of the route topic's offsets (stage two's
    consumer skipped route records) or of a view topic partition's, which every route record names (stage
    one's consumer skipped view records: no route record was ever made for them). Both topics' offsets
    are contiguous (no transactions, no compaction; stage one routes a view record it dead-letters as a
    marker), so the records in a jump are read straight from the broker and folded; records folded
    already (a false jump after a restart) are replays, skipped by batch id."""

    app: faust.App
    out: Outputs
    units: Units
    router: Router
    #: Input topic -> what it carries (a view's name, the table).
    views: Mapping[str, Topic]
    bootstrap: str
    #: The route topic.
    topic: str
    #: When the tail check last compared the view offsets with the group's commits (``time.monotonic``).
    sources_checked: float = 0.0

    async def fill_route(self, partition: int, start: int, end: int) -> None:
        """Fold the route records ``start`` to ``end`` (excluded) of ``partition``."""
        log.warning(
            "route partition %d: records %d to %d were not delivered by the consumer; reading them directly",
            partition,
            start,
            end - 1,
        )
        missing = await asyncio.to_thread(read_range, self.bootstrap, self.topic, partition, start=start, end=end)
        for offset, value, headers in missing:
            # A route record read here may name a view record past one its units never saw, as one the
            # consumer delivers may: those first (else the tail check, which starts from the last seen,
            # passes them by).
            await self.fill_sources_before(partition, headers)
            await self._fold(partition, value, headers, offset=offset, where=(self.topic, partition, offset))

    async def fill_sources_before(self, partition: int, headers: list[tuple[str, bytes]]) -> None:
        """Before a route record of ``partition`` (its ``headers``) is folded: the view records between the
        last its units saw of the view partition the record names and that one, which stage one's consumer
        skipped, read and folded."""
        source = source_of(headers)
        missing = None if source is None else self.units.source_gap(partition, source)
        if source is not None and missing is not None:
            await self.fill_source(partition, source.topic, source.partition, *missing)

    async def fill_source(self, partition: int, topic: str, view_partition: int, start: int, end: int) -> None:
        """Fold into the units of route ``partition`` the view records ``start`` to ``end`` (excluded) of
        ``topic``'s ``view_partition``, routed here as stage one would have."""
        log.warning(
            "%s partition %d: records %d to %d were never routed (its consumer skipped them); reading them "
            "directly for route partition %d",
            topic,
            view_partition,
            start,
            end - 1,
            partition,
        )
        missing = await asyncio.to_thread(read_range, self.bootstrap, topic, view_partition, start=start, end=end)
        for offset, value, headers in missing:
            source = Source(topic, view_partition, offset)
            routed = self.router.handle(value, headers, self.views.get(topic), source)
            for body, named in [(body, named) for p, body, named in routed.records if p == partition]:
                if routed.dead is None:
                    await self._fold(partition, body, named, offset=None, where=(topic, view_partition, offset))
                    continue
                self.units.handle(body, named, partition)  # its marker: the offset is seen here
                where = (topic, view_partition, offset)
                await self.out.settle_read(Outcome(dead=routed.dead), value, headers, where, table_partition=partition)
                self.out.metrics.folded(Outcome(dead=routed.dead), 0.0)

    async def _fold(
        self,
        partition: int,
        value: bytes | None,
        headers: list[tuple[str, bytes]],
        *,
        offset: int | None,
        where: tuple[str, int, int],
    ) -> None:
        """Fold a record read from the broker (``where``: topic, partition, offset) into the units of
        route ``partition`` and deliver what it led to, as the consumer's records are."""
        began = time.perf_counter()
        outcome = self.units.handle(value, headers, partition, offset)
        elapsed = time.perf_counter() - began
        await self.out.settle_read(outcome, value, headers, where, table_partition=partition)
        if outcome.publication is not None or outcome.dead is not None:
            self.out.metrics.folded(outcome, elapsed)
