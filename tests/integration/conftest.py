"""A real Apache Kafka broker and a real PostgreSQL server for the tests that need them: each started once
per run, on a free port.

Where Java or Maven is missing the Kafka tests are skipped with what to install; the rest still runs.
Where PostgreSQL's server binaries are missing the PostgreSQL tests fail, naming the package to install
(`.ci/run` installs it).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streamdetect.stream import broker
from tests.integration.kafka_helpers import Worker
from tests.integration.postgres_helpers import PASSWORD, LocalPostgres

#: The user of the test broker's SASL listener (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512).
SASL_USER, SASL_PASSWORD = "streamdetect-test", "not-a-secret-42"


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[tuple[str, str]]:
    """The run's broker: its plain and its SASL_PLAINTEXT bootstrap addresses."""
    missing = broker.missing_tools()
    if missing:
        pytest.skip(
            f"the Kafka tests need {' and '.join(missing)}: install a JDK 17 or newer and Maven "
            "(Debian: apt install openjdk-17-jdk-headless maven)"
        )
    port, sasl_port = broker.free_port(), broker.free_port()
    while sasl_port == port:
        sasl_port = broker.free_port()
    started = broker.start(port, sasl_port=sasl_port, sasl_users={SASL_USER: SASL_PASSWORD})
    try:
        yield started.bootstrap, f"127.0.0.1:{sasl_port}"
    finally:
        broker.stop(port)


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_broker: tuple[str, str]) -> str:
    return kafka_broker[0]


@pytest.fixture(scope="session")
def kafka_sasl_bootstrap(kafka_broker: tuple[str, str]) -> str:
    """The broker's listener that takes SASL logins of SASL_USER only."""
    return kafka_broker[1]


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.stop()


@pytest.fixture(scope="session")
def postgres() -> Iterator[LocalPostgres]:
    """The run's PostgreSQL cluster (``wal_level = logical``, loopback, removed at the end)."""
    server = LocalPostgres.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_password(monkeypatch: pytest.MonkeyPatch) -> str:
    """The publisher's password given as a publisher's environment gives it: PGPASSWORD."""
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    return PASSWORD
