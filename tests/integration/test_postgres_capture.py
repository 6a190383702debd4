"""The table's changes onto the stream, against real servers: PostgreSQL, Kafka, Kafka Connect with Debezium,
the capture and the worker. Inserts, updates and deletes (one moving a row out of a view's selection) reach
the findings topic, whose open findings then equal `check` on the database; and so they do after a worker,
the capture and the connector are each killed (SIGKILL) in the middle of a stream of changes."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import yaml
from click.testing import CliRunner

from streamdetect.cli.main import cli
from streamdetect.io.topology_file import load_topology
from streamdetect.stream import broker
from streamdetect.stream import connect as local
from tests.integration.kafka_helpers import Subprocess, Worker
from tests.integration.postgres_helpers import PASSWORD, LocalPostgres

ROWS = [
    ("387-399", "Alice", "47677", "Manager", "OC"),
    ("387-200", "Bob", "47602", "Engineer", "OC"),
    ("387-486", "Carol", "47678", "Engineer", "PC"),
    ("387-756", "Dan", "47905", "Dancer", "Flu"),
    ("387-665", "Ellen", "47909", "Engineer", "HD"),
    ("387-588", "Jack", "47906", "Manager", "HD"),
]


class Capture(Subprocess):
    """``streamdetect capture`` in a subprocess."""

    def __init__(self, path: Path, bootstrap: str, home: Path) -> None:
        self.log = home / f"capture-{time.monotonic_ns()}.log"
        command = [sys.executable, "-m", "streamdetect", "capture", str(path), "--bootstrap-servers", bootstrap]
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)


@pytest.fixture
def captured(
    postgres: LocalPostgres, kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Path, LocalPostgres, str]]:
    """A table of patients in the database with its changes captured: Connect running, its topology."""
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    name = f"cdc{time.monotonic_ns() % 10**9}"
    postgres.execute(
        f"CREATE TABLE {name} (ssn text PRIMARY KEY, name text, zip text, job text, disease text)",
        f"ALTER TABLE {name} REPLICA IDENTITY FULL",
    )
    with (
        psycopg.connect(postgres.uri, password=PASSWORD, autocommit=True) as connection,
        connection.cursor() as cursor,
    ):
        cursor.executemany(f"INSERT INTO {name} VALUES (%s, %s, %s, %s, %s)", ROWS)  # type: ignore[arg-type]
    document = {
        "name": name,
        "table": {
            "name": name,
            "attributes": ["SSN", "Name", "ZIP", "Job", "Disease"],
            "identifiers": ["SSN", "Name"],
            "sensitive": ["Disease"],
            "quasi_identifiers": ["ZIP"],
            "source": postgres.uri,
        },
        "views": [
            {"name": "v1", "sql": f"SELECT ssn, job, disease FROM {name} WHERE job <> 'Cook'"},
            {"name": "v2", "sql": f"SELECT name, zip, job FROM {name} WHERE job <> 'Manager'"},
        ],
        "checks": {"linkage": {"k": 2}, "table-k-anonymity": {"k": 2}},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    topology = load_topology(path)
    local.start(topology, kafka_bootstrap, port=broker.free_port())
    try:
        yield path, postgres, name
    finally:
        local.stop(topology, forget=True)


def _ids(result_output: str) -> list[str]:
    return sorted(finding["id"] for finding in json.loads(result_output)["findings"])


def _checked(path: Path) -> list[str]:
    result = CliRunner().invoke(cli, ["check", str(path), "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    return _ids(result.stdout)


def _streamed(path: Path, bootstrap: str) -> list[str] | None:
    result = CliRunner().invoke(cli, ["findings", str(path), "--bootstrap-servers", bootstrap, "--format", "json"])
    return _ids(result.stdout) if result.exit_code in (0, 1) else None


def _until_equal(path: Path, bootstrap: str, worker: Worker, capture: Capture, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    expected = _checked(path)
    streamed = None
    while time.monotonic() < deadline:
        streamed = _streamed(path, bootstrap)
        if streamed == expected:
            return
        assert worker.process.poll() is None, worker.output()[-3000:]
        assert capture.process.poll() is None, capture.log.read_text()[-3000:]
        time.sleep(1.0)
    raise AssertionError(
        f"the stream's findings {streamed} never equalled check's {expected}; capture: "
        f"{capture.log.read_text()[-2000:]}\nworker: {worker.output()[-2000:]}"
    )


def test_inserts_updates_and_deletes_reach_the_findings(
    captured: tuple[Path, LocalPostgres, str], kafka_bootstrap: str, tmp_path: Path, workers: list[Worker]
) -> None:
    path, postgres, table = captured
    capture = Capture(path, kafka_bootstrap, tmp_path)
    workers.append(Worker(path, kafka_bootstrap, tmp_path))
    try:
        _until_equal(path, kafka_bootstrap, workers[0], capture)  # the snapshot
        before = _checked(path)
        postgres.execute(
            f"INSERT INTO {table} VALUES ('387-901', 'Zoe', '47999', 'Pilot', 'Flu'), "
            "('387-902', 'Yan', '47998', 'Pilot', 'Cold')",
            f"UPDATE {table} SET job = 'Manager' WHERE name = 'Dan'",  # out of v2's selection
            f"UPDATE {table} SET disease = 'Cold' WHERE name = 'Zoe'",
            f"DELETE FROM {table} WHERE name = 'Bob'",
        )
        _until_equal(path, kafka_bootstrap, workers[0], capture)
        assert _checked(path) != before  # the changes changed what is disclosed
    finally:
        capture.stop()


def _changes(postgres: LocalPostgres, table: str, count: int, seed: int, done: threading.Event) -> None:
    """``count`` random inserts, updates and deletes, a few per transaction, paced over a few seconds."""
    generator = random.Random(seed)
    jobs, diseases = ["Manager", "Engineer", "Dancer", "Cook", "Pilot"], ["OC", "PC", "Flu", "HD", "Cold"]
    with psycopg.connect(postgres.uri, password=PASSWORD, autocommit=False) as connection:
        for step in range(count):
            ssn = f"s{generator.randrange(60)}"
            action = generator.random()
            if action < 0.5:
                connection.execute(
                    f"INSERT INTO {table} VALUES (%s, %s, %s, %s, %s) ON CONFLICT (ssn) DO NOTHING",  # type: ignore[arg-type]
                    (
                        ssn,
                        f"n{generator.randrange(40)}",
                        f"4{generator.randrange(10)}",
                        generator.choice(jobs),
                        generator.choice(diseases),
                    ),
                )
            elif action < 0.8:
                connection.execute(
                    f"UPDATE {table} SET job = %s, disease = %s WHERE ssn = %s",  # type: ignore[arg-type]
                    (generator.choice(jobs), generator.choice(diseases), ssn),
                )
            else:
                connection.execute(f"DELETE FROM {table} WHERE ssn = %s", (ssn,))  # type: ignore[arg-type]
            if step % 5 == 4:
                connection.commit()
                time.sleep(0.01)
        connection.commit()
    done.set()


def test_killing_the_worker_the_capture_and_the_connector_loses_and_repeats_no_change(
    captured: tuple[Path, LocalPostgres, str], kafka_bootstrap: str, tmp_path: Path, workers: list[Worker]
) -> None:
    path, postgres, table = captured
    topology = load_topology(path)
    capture = Capture(path, kafka_bootstrap, tmp_path)
    workers.append(Worker(path, kafka_bootstrap, tmp_path))
    try:
        _until_equal(path, kafka_bootstrap, workers[-1], capture)
        done = threading.Event()
        writer = threading.Thread(target=_changes, args=(postgres, table, 1500, 7, done))
        writer.start()
        time.sleep(1.5)
        workers[-1].kill()  # the worker, mid-stream
        workers.append(Worker(path, kafka_bootstrap, tmp_path))
        time.sleep(1.5)
        capture.kill()  # the capture, mid-stream
        capture = Capture(path, kafka_bootstrap, tmp_path)
        time.sleep(1.5)
        connect = local.running(topology)
        assert connect is not None
        os.killpg(connect.pid, signal.SIGKILL)  # the connector, mid-stream
        while local.running(topology) is not None:  # gone once reaped
            time.sleep(0.1)
        assert local.start(topology, kafka_bootstrap, port=connect.port).pid != connect.pid
        writer.join(timeout=120)
        assert done.is_set()
        _until_equal(path, kafka_bootstrap, workers[-1], capture, timeout_s=180)
    finally:
        capture.stop()


def test_a_change_the_server_cannot_send_stops_the_capture_after_those_before_it(
    postgres: LocalPostgres,
    kafka_bootstrap: str,
    tmp_path: Path,
    workers: list[Worker],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A SQL_ASCII database keeps any bytes; a row written with text that is not UTF-8 after the capture
    # started cannot be decoded by the server for Debezium, whose default retries it without end while the
    # connector reports running. With a finite --retry-for its task fails, and the capture, once it has
    # translated every change before that one, exits 2 with the server's reason; `connect start` restarts
    # the failed connector.
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    database = f"ascii{time.monotonic_ns() % 10**9}"
    postgres.execute(f"CREATE DATABASE {database} ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0")
    uri = postgres.uri.rsplit("/", 1)[0] + "/" + database
    with psycopg.connect(uri, password=PASSWORD, autocommit=True) as connection:
        connection.execute("CREATE TABLE people (name text, zip text, disease text)")
        connection.execute("ALTER TABLE people REPLICA IDENTITY FULL")
        connection.execute("INSERT INTO people VALUES ('Bob', '02139', 'Cold'), ('Ann', '02135', 'Flu')")
    document = {
        "name": database,
        "table": {
            "name": "people",
            "attributes": ["Name", "Zip", "Disease"],
            "identifiers": ["Name"],
            "sensitive": ["Disease"],
            "source": uri + "?client_encoding=LATIN1",  # `check` reads the bytes as what they are
        },
        "views": [
            {"name": "names", "sql": "SELECT name, zip FROM people"},
            {"name": "diseases", "sql": "SELECT zip, disease FROM people"},
        ],
        "checks": {"linkage": {"k": 2}},
    }
    path = tmp_path / f"{database}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    port = str(broker.free_port())
    start = ["connect", "start", str(path), "--bootstrap-servers", kafka_bootstrap, "--port", port, "--retry-for", "2"]
    started = CliRunner().invoke(cli, start)
    assert started.exit_code == 0, started.output
    capture = Capture(path, kafka_bootstrap, tmp_path)
    workers.append(Worker(path, kafka_bootstrap, tmp_path))
    try:
        _until_equal(path, kafka_bootstrap, workers[0], capture)  # the snapshot: Bob has Cold, Ann Flu
        with psycopg.connect(uri, password=PASSWORD, autocommit=True) as connection:
            connection.execute("INSERT INTO people VALUES ('Cat', '02139', 'Flu')")  # Bob no longer tied
            expected = _checked(path)
            assert len(expected) == 1  # Ann's disease; Bob's is no longer certain
            # Sent and folded before the bad change is written: Debezium drops the changes it had queued
            # and not yet handed to Connect when it fails (docs/streaming.md, "When the connector fails").
            _until_equal(path, kafka_bootstrap, workers[0], capture)
            jose = "convert_from('\\x4a6f73e9'::bytea, 'SQL_ASCII')"  # "Jos" and LATIN1's e acute
            connection.execute(f"INSERT INTO people VALUES ({jose}, '02135', 'Cold')")  # type: ignore[arg-type]
        assert capture.process.wait(timeout=120) == 2
        said = capture.log.read_text()
        assert "Debezium's connector failed" in said
        assert 'invalid byte sequence for encoding "UTF8"' in said
        assert "Traceback" not in said
        # The findings stay those of every change before the one it could not send.
        assert _streamed(path, kafka_bootstrap) == expected
        restarted = CliRunner().invoke(cli, start)
        assert restarted.exit_code == 0, restarted.output
        assert "restarting it" in restarted.stderr
    finally:
        capture.stop()
        local.stop(load_topology(path), forget=True)
