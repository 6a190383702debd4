"""The Faust worker: view topics in, findings and dead letters out, the Detector's state in a Faust table.

One agent reads every view topic of the topology. Each record goes through
:class:`~streamdetect.stream.service.DetectorService`: a dead letter is produced to the dead-letter topic
(the record's value and headers, with the reason and detail as headers); a publication is folded into the
Detector, its raised and cleared findings go to the findings topic keyed by finding id, and the state
pieces it wrote go to the table ``state``, whose changelog topic restores a replacement worker. A
replayed record (same batch id) changes nothing.

This first worker keeps the whole state in one place: the view topics must have one partition each and
one worker runs per application (the Faust table is partitioned by the partition of the record being
processed). Sharing the work between workers needs the rows of views holding an identifier routed by its
value and the other views broadcast (docs/design.md, co-partitioning); that is the next step of issue 8.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import faust

from streamdetect.model.topology import Topology
from streamdetect.stream.metrics import WorkerMetrics
from streamdetect.stream.records import DEFAULT_MAX_BYTES
from streamdetect.stream.service import DetectorService
from streamdetect.stream.topics import dead_letter_topic, findings_topic, view_topic

log = logging.getLogger(__name__)
_ILLEGAL = re.compile(r"[^A-Za-z0-9._-]")


def app_id(topology: Topology) -> str:
    """The Faust application (consumer group, changelog topic prefix) of a topology."""
    return f"streamdetect-{_ILLEGAL.sub('_', topology.name)}"


def build_app(
    topology: Topology,
    bootstrap: str,
    *,
    datadir: Path,
    checks: Sequence[str] | None = None,
    store: str = "memory://",
    web_port: int | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    metrics: WorkerMetrics | None = None,
) -> faust.App:
    """The worker's Faust application for ``topology`` on the brokers ``bootstrap`` (host:port, comma
    separated). Its web server (Faust's, for its own health pages) binds 127.0.0.1 only, and only when
    ``web_port`` is given: two workers on one host would otherwise both take port 6066. ``metrics``
    counts what every record led to (served by the caller, :meth:`WorkerMetrics.serve`)."""
    brokers = [f"kafka://{address.strip()}" for address in bootstrap.split(",") if address.strip()]
    app = faust.App(
        app_id(topology),
        broker=brokers,
        store=store,
        datadir=str(datadir),
        web_enabled=web_port is not None,
        web_host="127.0.0.1",
        web_port=web_port or 6066,
        topic_partitions=1,
        consumer_auto_offset_reset="earliest",
        producer_acks=-1,
        producer_max_request_size=max(max_bytes + 64 * 1024, 1_048_576),
        consumer_max_fetch_size=max(max_bytes + 64 * 1024, 4_194_304),
    )
    topics = {view_topic(topology, view): view.name for view in topology.views}
    source = app.topic(*topics, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")
    findings = app.topic(findings_topic(topology), key_serializer="raw", value_serializer="raw")
    dead_letters = app.topic(dead_letter_topic(topology), key_serializer="raw", value_serializer="raw")
    # bytes keys and values: Faust then writes and recovers the changelog raw (other types go through JSON).
    state: Any = app.Table("state", default=None, partitions=1, key_type=bytes, value_type=bytes)
    service = DetectorService(topology, checks, max_bytes)
    if metrics is not None:
        metrics.examined(service.detector.summaries({}))

    @app.agent(source, concurrency=1)
    async def ingest(stream: faust.StreamT[bytes]) -> None:
        async for event in stream.events():
            if not service.restored:
                service.restore({_text(key): value for key, value in state.items()})
                if metrics is not None:
                    metrics.state_size.set(service.state_bytes)
            message = event.message
            began = time.perf_counter()
            outcome = service.handle(event.value, list(message.headers or ()), topics.get(message.topic))
            if metrics is not None:
                metrics.record(outcome, time.perf_counter() - began)
                # The highwater is the offset the next record will take: what is left after this one.
                left = app.consumer.highwater(message.tp) - message.offset - 1
                metrics.lag.labels(message.topic, str(message.partition)).set(max(left, 0))
            if outcome.dead is not None:
                headers = [
                    *(message.headers or ()),
                    ("streamdetect-reason", outcome.dead.reason.encode()),
                    ("streamdetect-detail", outcome.dead.detail.encode()),
                    ("streamdetect-topic", message.topic.encode()),
                ]
                await dead_letters.send(value=event.value, headers=headers)
                log.warning("dead letter from %s: %s", message.topic, outcome.dead.reason)
                continue
            # Finding events are delivered before the state (with the batch id that marks the record
            # done) is written: a worker killed in between sees the record again and sends the events
            # again (consumers fold them idempotently); the other order could lose them for good.
            sent = [await findings.send(key=finding_id, value=body) for finding_id, body in outcome.events]
            if sent:
                await asyncio.gather(*sent)
            for name, piece in outcome.writes.items():
                state[name.encode()] = piece
            if outcome.events:
                log.info("%d finding event(s) from %s", len(outcome.events), message.topic)

    return app


def _text(key: object) -> str:
    return key.decode() if isinstance(key, bytes) else str(key)


def run_worker(app: faust.App, loglevel: str = "warn") -> None:
    """Run the worker until SIGINT or SIGTERM (then it stops cleanly, committing what it processed)."""
    from faust.worker import Worker  # noqa: PLC0415 (imports the event loop machinery only to run)

    Worker(app, loglevel=loglevel, quiet=True).execute_from_commandline()
