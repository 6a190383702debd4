"""How long the worker's consumer lets the broker hold a fetch: Faust's aiokafka driver with a shorter wait.

aiokafka keeps one fetch request in flight per broker, for the partitions whose records it does not
hold already, and the broker answers it once it has a byte for one of them or ``fetch_max_wait_ms`` has
passed. Faust's driver passes 1,500 ms. A worker that folds records for most of a second leaves the
records of some partitions buffered, so the next request asks only for the others; records of the
buffered partitions that arrive meanwhile wait for its answer. Measured through the broker on BP at
10,000 rows/s (linkage, k-anonymity and SIND in one worker): every other fold came after 0.4-0.7 s with
nothing to do and then took twice the records, and the p99 detection latency was 2.9 s; with 100 ms the
folds follow each other (gaps of 0.04-0.06 s) and it was 2.0 s. The cost is a fetch request every
:data:`FETCH_MAX_WAIT_MS` per broker while a worker is idle.
"""

from __future__ import annotations

from typing import Any

import aiokafka
import faust
from faust.transport.drivers import aiokafka as driver

#: The longest a fetch waits at the broker for records (Kafka's own default is 500 ms; Faust passes 1,500).
FETCH_MAX_WAIT_MS = 100


def tuned(consumer: aiokafka.AIOKafkaConsumer) -> aiokafka.AIOKafkaConsumer:
    """``consumer`` (not started) with fetches waiting at most :data:`FETCH_MAX_WAIT_MS` at the broker: read
    when it starts, where it builds its fetcher. Refuses a consumer that no longer keeps the setting there."""
    if not hasattr(consumer, "_fetch_max_wait_ms"):
        raise RuntimeError("this aiokafka consumer does not keep fetch_max_wait_ms where the worker sets it")
    consumer._fetch_max_wait_ms = FETCH_MAX_WAIT_MS
    return consumer


class _ConsumerThread(driver.AIOKafkaConsumerThread):
    def _create_worker_consumer(self, transport: Any) -> aiokafka.AIOKafkaConsumer:
        return tuned(super()._create_worker_consumer(transport))


class _Consumer(driver.Consumer):
    def _new_consumer_thread(self) -> driver.AIOKafkaConsumerThread:
        return _ConsumerThread(self, loop=self.loop, beacon=self.beacon)


class Transport(driver.Transport):
    """Faust's aiokafka transport whose worker consumers fetch with :data:`FETCH_MAX_WAIT_MS`."""

    Consumer = _Consumer


def install(app: faust.App) -> None:
    """Give ``app`` this transport (before anything reads its topics: the transport is made at first use)."""
    app.transport = Transport(app.conf.broker_consumer, app)
