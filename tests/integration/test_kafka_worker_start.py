"""A worker's start on a broker that has never seen a consumer group, its output going to a file: a
plain log (no terminal escape codes) and no ERROR line, though the broker makes its offsets topic then."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from streamdetect.io.topology_file import load_topology
from streamdetect.stream import broker
from streamdetect.stream.publish import group_ready
from streamdetect.stream.worker import app_id
from tests.integration.kafka_helpers import Worker, table1_topology, until


@pytest.fixture
def fresh_broker(kafka_bootstrap: str) -> Iterator[str]:
    """A broker of its own, started now (the run's broker has long made its offsets topic)."""
    del kafka_bootstrap  # skipped with it where Java or Maven is missing
    port = broker.free_port()
    started = broker.start(port)
    try:
        yield started.bootstrap
    finally:
        broker.stop(port)


def test_a_worker_on_a_fresh_broker_logs_plainly_and_without_errors(
    fresh_broker: str, tmp_path: Path, workers: list[Worker]
) -> None:
    path = table1_topology(tmp_path, "fresh-start")
    # At the default log level: below WARNING Faust shows no start-up spinner anyway.
    worker = Worker(path, fresh_broker, tmp_path, extra=("--loglevel", "warn"))
    workers.append(worker)
    group = app_id(load_topology(path))
    until(lambda: group_ready(fresh_broker, group, 1), "the worker's group stable", worker)
    worker.stop()
    output = worker.output()
    assert "\x1b[" not in output, output[:2000]
    assert "\x08" not in output, output[:2000]
    errors = [line for line in output.splitlines() if "[ERROR]" in line]
    assert not errors, "\n".join(errors)
