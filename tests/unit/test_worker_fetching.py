"""The worker's consumers fetch with a short wait at the broker (streamdetect.stream.worker.fetching)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiokafka
import pytest
from faust.transport.drivers import aiokafka as driver

from streamdetect.io.topology_file import load_topology
from streamdetect.stream.security import KafkaSecurity
from streamdetect.stream.settings import WorkerSettings
from streamdetect.stream.worker import fetching
from streamdetect.stream.worker.app import build_app

ROOT = Path(__file__).resolve().parents[2]


def test_a_consumer_is_tuned_to_the_short_wait() -> None:
    async def made() -> aiokafka.AIOKafkaConsumer:  # aiokafka makes its objects inside a running loop
        return aiokafka.AIOKafkaConsumer(bootstrap_servers="127.0.0.1:1", fetch_max_wait_ms=1500)

    consumer = asyncio.run(made())
    assert consumer._fetch_max_wait_ms == 1500
    assert fetching.tuned(consumer)._fetch_max_wait_ms == fetching.FETCH_MAX_WAIT_MS == 100


def test_a_consumer_without_the_setting_is_refused() -> None:
    with pytest.raises(RuntimeError, match="fetch_max_wait_ms"):
        fetching.tuned(object())  # type: ignore[arg-type]


def test_the_worker_app_reads_through_the_tuned_transport(tmp_path: Path) -> None:
    topology = load_topology(ROOT / "topologies" / "dou-patients.yaml")
    settings = WorkerSettings(bootstrap="127.0.0.1:1", datadir=tmp_path, security=KafkaSecurity())
    app = build_app(topology, settings)
    assert isinstance(app.transport, fetching.Transport)
    assert app.transport.Consumer is fetching._Consumer
    # The driver's methods the subclasses override: a Faust that renamed them would leave the wait at 1.5 s.
    assert "_create_worker_consumer" in vars(driver.AIOKafkaConsumerThread)
    assert "_new_consumer_thread" in vars(driver.Consumer)
