"""Kafka Connect with Debezium's PostgreSQL connector, on this machine: the private table's changes onto
Kafka, for ``streamdetect capture`` to turn into the views' records.

Like the local broker (:mod:`streamdetect.stream.broker`), its jars come from Maven Central through Maven
once (Kafka Connect's runtime, and Debezium's connector with PostgreSQL's JDBC driver), into the cache. It
runs as a standalone Connect worker in a session of its own, its files in ``connect-<topology>/`` beside
the jars: the configuration, the log, the pid, and the connector's offsets (its position in the
write-ahead log), which stay when it stops, so that it starts again where it was; ``stop --forget`` removes
them with the database's replication slot and publication.

The connector reads the table through PostgreSQL's own logical decoding (``pgoutput``, no server plugin)
from a replication slot of its own: it takes a snapshot of the table first, then streams every committed
change. The table's change topic is created beforehand with one partition (its changes keep their
order). The database's password is never written down: Connect reads it from ``PGPASSWORD`` in its
environment (a configuration provider), else the JDBC driver reads ``.pgpass``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from streamdetect.io import postgres
from streamdetect.io.cache import cache_dir
from streamdetect.model.topology import Topology
from streamdetect.stream.broker import (
    KAFKA_VERSION,
    BrokerError,
    alive,
    log4j_properties,
    maven_jars,
    maven_pom,
    require_tools,
    tail,
    terminate,
)
from streamdetect.stream.capture import capture_of
from streamdetect.stream.publish import kafka_client
from streamdetect.stream.topics import changes_prefix

DEBEZIUM_VERSION = "3.6.1.Final"
DEFAULT_PORT = 8083
_ILLEGAL = re.compile(r"[^a-z0-9_]")

_WORKER = """bootstrap.servers={bootstrap}
key.converter=org.apache.kafka.connect.json.JsonConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
key.converter.schemas.enable=false
value.converter.schemas.enable=false
offset.storage.file.filename={offsets}
offset.flush.interval.ms=1000
listeners=http://127.0.0.1:{port}
plugin.discovery=service_load
config.providers=env
config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider
# Change events are large (both images, JSON): batched on their way to the broker.
producer.linger.ms=10
producer.batch.size=524288
"""

_CONNECTOR = """name={name}
connector.class=io.debezium.connector.postgresql.PostgresConnector
tasks.max=1
plugin.name=pgoutput
database.hostname={host}
database.port={port}
database.user={user}
database.dbname={dbname}
{password}{ssl}topic.prefix={prefix}
table.include.list={table}
slot.name={slot}
publication.name={slot}
publication.autocreate.mode=filtered
snapshot.mode=initial
decimal.handling.mode=double
tombstones.on.delete=false
# Batches of changes handed to Connect as soon as they are read (the default waits 500 ms between polls).
poll.interval.ms=20
max.batch.size=8192
max.queue.size=32768
# A retriable error (the database unreachable, or a change the server cannot send, such as text that is
# not UTF-8) restarts the task {retries} times in a row, {wait_ms} ms apart; then the task fails, where
# Debezium's default retries without end while the connector reports running.
errors.max.retries={retries}
retriable.restart.connector.wait.ms={wait_ms}
"""

#: How long Debezium retries a retriable error, in a row, before its task fails (``connect start
#: --retry-for``): rides out a database restarted or briefly unreachable; a change it cannot send fails
#: after it.
RETRY_FOR_S = 300.0
#: Debezium's wait between two of those retries (its default).
RETRY_WAIT_S = 10.0
#: After a restart is asked, how long a FAILED status may still be the one from before it (Connect shows
#: another state once the restart begins): a connector FAILED after that has failed again.
RESTART_GRACE_S = 10.0

#: Debezium says what it does (snapshot steps, positions) at INFO; Connect and Kafka's clients only warn.
_DEBEZIUM_LOG = "logger.debezium.name = io.debezium\nlogger.debezium.level = INFO\n"


@dataclass(frozen=True)
class Connect:
    """A Connect worker :func:`start` started: its REST port, pid, files, and the change topic."""

    port: int
    pid: int
    home: Path
    topic: str

    @property
    def log(self) -> Path:
        return self.home / "connect.log"


def connect_jars(progress: Callable[[str], None] | None = None) -> Path:
    """Kafka Connect's and Debezium's jars, fetched with Maven on first use (about 30 MB)."""
    require_tools()
    pom = maven_pom(
        "kafka-connect",
        [
            ("org.apache.kafka", "connect-runtime", KAFKA_VERSION),
            ("org.apache.kafka", "connect-json", KAFKA_VERSION),
            ("io.debezium", "debezium-connector-postgres", DEBEZIUM_VERSION),
        ],
    )
    what = f"Kafka Connect {KAFKA_VERSION} and Debezium {DEBEZIUM_VERSION}"
    home = cache_dir() / f"connect-{KAFKA_VERSION}-debezium-{DEBEZIUM_VERSION}"
    return maven_jars(home, pom, f"debezium-connector-postgres-{DEBEZIUM_VERSION}.jar", what, progress)


def slot_name(topology: Topology) -> str:
    """The replication slot (and publication) of ``topology``'s capture: ``streamdetect_<topology>``."""
    return f"streamdetect_{_ILLEGAL.sub('_', topology.name.lower())}"[:63]


def _home(topology: Topology) -> Path:
    return cache_dir() / f"connect-{_ILLEGAL.sub('_', topology.name.lower())}"


def running(topology: Topology) -> Connect | None:
    """The Connect worker :func:`start` left running for ``topology``, if its process is alive."""
    home = _home(topology)
    try:
        port, pid, topic = json.loads((home / "running.json").read_text()).values()
    except (FileNotFoundError, ValueError):
        return None
    return Connect(int(port), int(pid), home, str(topic)) if alive(int(pid)) else None


def start(
    topology: Topology,
    bootstrap: str,
    *,
    database: str | None = None,
    port: int = DEFAULT_PORT,
    timeout_s: float = 180.0,
    retry_for_s: float = RETRY_FOR_S,
    progress: Callable[[str], None] | None = None,
) -> Connect:
    """Start Kafka Connect with Debezium's connector on ``topology``'s table (in ``database``, else
    ``table.source``), writing its changes to the change topic; return once the connector's task runs. A
    worker this function started for the topology and still running is returned as is, its connector
    restarted first if it failed. ``retry_for_s``: how long a retriable error is retried before the task
    fails (:data:`RETRY_FOR_S`).

    Raises :class:`~streamdetect.errors.TopologyError` when the table's changes cannot be captured exactly
    (said with the fix), :class:`BrokerError` when Java or Maven is missing or the connector does not run
    within ``timeout_s`` (with its log's end)."""
    already = running(topology)
    if already is not None:
        status = _status(already.port, _connector_name(topology))
        if status is not None and _state(status) == "FAILED":
            _restart(topology, already, status, timeout_s, progress)
        return already
    capture = capture_of(topology, database)  # the table's changes can be captured exactly, or says why
    uri, table, topic = capture.uri, capture.table, capture.topic
    libs = connect_jars(progress)
    home = _home(topology)
    home.mkdir(parents=True, exist_ok=True)
    _create_change_topic(bootstrap, topic)
    name = _connector_name(topology)
    (home / "worker.properties").write_text(_WORKER.format(bootstrap=bootstrap, offsets=home / "offsets", port=port))
    (home / "connector.properties").write_text(
        _connector(
            name,
            uri,
            changes_prefix(topology),
            f"{table.schema}.{table.name}",
            slot_name(topology),
            retry_for_s=retry_for_s,
        )
    )
    (home / "log4j2.properties").write_text(log4j_properties(home / "connect.log", "WARN", _DEBEZIUM_LOG))
    if progress is not None:
        progress(f"starting Kafka Connect with Debezium's PostgreSQL connector (REST on 127.0.0.1:{port})")
    command = [
        "java",
        "-Xmx512m",
        f"-Dlog4j2.configurationFile={home / 'log4j2.properties'}",
        "-cp",
        str(libs / "*"),
        "org.apache.kafka.connect.cli.ConnectStandalone",
        str(home / "worker.properties"),
        str(home / "connector.properties"),
    ]
    with (home / "stdout.log").open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    (home / "running.json").write_text(json.dumps({"port": port, "pid": process.pid, "topic": topic}))
    connect = Connect(port, process.pid, home, topic)
    try:
        _await_running(connect, name, timeout_s, process=process)
    except BrokerError:
        stop(topology)
        raise
    return connect


def failure(topology: Topology) -> str | None:
    """What made the connector :func:`start` runs for ``topology`` on this machine fail (its trace's first
    line and root cause, and where Connect's log is), None while it runs, or when no worker of it runs here."""
    connect = running(topology)
    if connect is None:
        return None
    status = _status(connect.port, _connector_name(topology))
    if status is None or _state(status) != "FAILED":
        return None
    return f"{_failure(status)} (Connect's log: {connect.log})"


def _restart(
    topology: Topology,
    connect: Connect,
    status: dict[str, Any],
    timeout_s: float,
    progress: Callable[[str], None] | None,
) -> None:
    """Restart the failed connector (``status``: its status saying so) and its tasks of a running worker;
    wait until they run again."""
    name = _connector_name(topology)
    if progress is not None:
        progress(f"Debezium's connector had failed ({_failure(status)}): restarting it")
    url = f"http://127.0.0.1:{connect.port}/connectors/{name}/restart?includeTasks=true&onlyFailed=true"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=10):
            pass
    except (urllib.error.URLError, OSError) as error:
        raise BrokerError(f"Kafka Connect did not restart the connector: {error}") from error
    _await_running(connect, name, timeout_s, restarted=True)


def _await_running(
    connect: Connect,
    name: str,
    timeout_s: float,
    *,
    process: subprocess.Popen[bytes] | None = None,
    restarted: bool = False,
    grace_s: float = RESTART_GRACE_S,
) -> None:
    """Return once connector ``name`` and its tasks run; raise :class:`BrokerError` as soon as one fails
    (with the failure), when the Connect ``process`` exits, or after ``timeout_s``. ``restarted``: a
    restart of the failed connector was just asked, so a FAILED status is the one from before it until
    Connect shows another state or ``grace_s`` pass; FAILED after that is a new failure."""
    began = time.monotonic()
    settled = not restarted
    while time.monotonic() < began + timeout_s:
        if process is not None and process.poll() is not None:
            raise BrokerError(
                f"Kafka Connect exited with code {process.returncode}: {tail(connect.log)} "
                f"{tail(connect.home / 'stdout.log')}"
            )
        status = _status(connect.port, name)
        state = _state(status)
        if state == "RUNNING":
            return
        if state == "FAILED" and (settled or time.monotonic() - began > grace_s):
            assert status is not None
            again = " again after its restart" if restarted else ""
            raise BrokerError(f"Debezium's connector failed{again}: {_failure(status)} (Connect's log: {connect.log})")
        settled = settled or state != "FAILED"
        time.sleep(0.5)
    again = " again" if restarted else ""
    raise BrokerError(f"Debezium's connector did not run{again} within {timeout_s:.0f} s: {tail(connect.log)}")


def _connector_name(topology: Topology) -> str:
    return f"streamdetect-{_ILLEGAL.sub('-', topology.name.lower())}"


def stop(topology: Topology, *, forget: bool = False, database: str | None = None, timeout_s: float = 30.0) -> bool:
    """Stop the Connect worker of ``topology`` (SIGTERM, then SIGKILL after ``timeout_s``); False when none
    ran. ``forget``: also remove its offsets, and the replication slot and publication in the database, so
    that a next start takes a new snapshot (the view topics must then start empty too)."""
    connect = running(topology)
    if connect is not None:
        terminate(connect.pid, timeout_s)
    if forget:
        shutil.rmtree(_home(topology), ignore_errors=True)
        uri = database or topology.table.source
        if postgres.is_database(uri):
            assert uri is not None
            postgres.drop_slot(uri, slot_name(topology))
    return connect is not None


def _connector(name: str, uri: str, prefix: str, table: str, slot: str, *, retry_for_s: float) -> str:
    parts = urlsplit(uri)
    query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    password = "database.password=${env:PGPASSWORD}\n" if os.environ.get("PGPASSWORD") else ""
    ssl = f"database.sslmode={query['sslmode']}\n" if "sslmode" in query else ""
    wait_s = min(RETRY_WAIT_S, retry_for_s)
    return _CONNECTOR.format(
        name=name,
        host=parts.hostname or "localhost",
        port=parts.port or 5432,
        user=unquote(parts.username or os.environ.get("PGUSER", "postgres")),
        dbname=unquote(parts.path.lstrip("/")) or os.environ.get("PGDATABASE", "postgres"),
        password=password,
        ssl=ssl,
        prefix=prefix,
        table=table,
        slot=slot,
        retries=max(1, math.ceil(retry_for_s / wait_s)),
        wait_ms=round(wait_s * 1000),
    )


def _create_change_topic(bootstrap: str, topic: str) -> None:
    """The change topic with one partition, unless it exists (then it must have one)."""
    from kafka import KafkaAdminClient  # noqa: PLC0415
    from kafka.admin import NewTopic  # noqa: PLC0415
    from kafka.errors import TopicAlreadyExistsError  # noqa: PLC0415

    admin = kafka_client(KafkaAdminClient, bootstrap, client_id="streamdetect-connect")
    try:
        with contextlib.suppress(TopicAlreadyExistsError):
            admin.create_topics([NewTopic(topic, 1, 1)])
        described = admin.describe_topics([topic])
        partitions = len(described[0]["partitions"]) if described else 1
        if partitions != 1:
            raise BrokerError(f"the change topic {topic} has {partitions} partitions; its changes need exactly one")
    finally:
        admin.close()


def _status(port: int, name: str) -> dict[str, Any] | None:
    """The connector's status from Connect's REST API (None: not answering yet)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/connectors/{name}/status", timeout=2) as response:
            status = json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None
    return status if isinstance(status, dict) else None


def _state(status: dict[str, Any] | None) -> str | None:
    """``RUNNING`` once the connector and its tasks run, ``FAILED`` when one failed, else None."""
    if status is None:
        return None
    tasks = status.get("tasks") or []
    states = [status.get("connector", {}).get("state"), *(task.get("state") for task in tasks)]
    if "FAILED" in states:
        return "FAILED"
    return "RUNNING" if tasks and all(state == "RUNNING" for state in states) else None


def _failure(status: dict[str, Any]) -> str:
    """The failed parts' traces, each as its first line and its root cause (the last "Caused by", with the
    server's "Where:" line after it)."""
    traces = [task.get("trace", "") for task in status.get("tasks", [])]
    traces.append(status.get("connector", {}).get("trace", ""))
    said = []
    for trace in traces:
        lines = [line.strip() for line in trace.splitlines() if line.strip()]
        if not lines:
            continue
        causes = [i for i, line in enumerate(lines) if line.startswith("Caused by:")]
        cause = lines[causes[-1] : causes[-1] + 2] if causes else []
        said.append(" ".join([lines[0], *cause[:1], *(line for line in cause[1:] if line.startswith("Where:"))]))
    return " ".join(said) or "(no trace)"
