"""A real Apache Kafka broker for the tests that need one: started once per run, on a free port.

Where Java or Maven is missing the Kafka tests are skipped with what to install; the rest still runs.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streamdetect.stream import broker
from tests.integration.kafka_helpers import Worker


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    missing = broker.missing_tools()
    if missing:
        pytest.skip(
            f"the Kafka tests need {' and '.join(missing)}: install a JDK 17 or newer and Maven "
            "(Debian: apt install openjdk-17-jdk-headless maven)"
        )
    port = broker.free_port()
    started = broker.start(port)
    try:
        yield started.bootstrap
    finally:
        broker.stop(port)


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.stop()
