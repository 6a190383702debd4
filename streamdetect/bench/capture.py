"""``streamdetect bench capture``: the table's changes from the database to the findings, through Debezium
(Kafka Connect), ``streamdetect capture`` and a worker, on real servers.

The topology's table (``table.source`` a ``postgresql://`` URI, such as ``bench generate bp --database``
writes) is copied in its database under a fresh name, with its own capture (connector, slot, topics,
groups), so the measurement starts from nothing and the topology's own table is not changed. Once the
snapshot of the copy is folded in, ``--changes`` row changes (updates of the sensitive attribute, inserts
of copies of rows under new identifiers, deletes, in the proportions 2:1:1) are committed at ``--rate``
changes per second, ``--batch`` per transaction. The figures: changes per second until the capture has
translated every change, and until the worker has also committed every record; the detection latency
from each change's commit (the records carry the commit time); and whether the open findings then equal
``check`` on the database. Everything made for the run is removed at its end.
"""

from __future__ import annotations

import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

import streamdetect
from streamdetect.bench.stream import check_seconds, quantiles
from streamdetect.errors import TopologyError
from streamdetect.io import postgres
from streamdetect.io.topology_file import load_topology
from streamdetect.model.topology import Topology
from streamdetect.stream import connect
from streamdetect.stream.broker import free_port
from streamdetect.stream.events import fold_events
from streamdetect.stream.metrics import scrape
from streamdetect.stream.publish import committed_lag, group_ready, input_topics, read_topic
from streamdetect.stream.topics import findings_topic
from streamdetect.stream.worker import app_id


def run_capture_bench(
    path: Path,
    bootstrap: str,
    *,
    changes: int = 100_000,
    rate: float = 10_000.0,
    batch: int = 500,
    seed: int = 0,
    mix: tuple[int, int, int] = (2, 1, 1),
    coalesce: int = 32,
    timeout_s: float = 1800.0,
) -> dict[str, Any]:
    """Measure the capture path on a copy of ``path``'s table (module docstring)."""
    original = load_topology(path)
    uri = original.table.source
    if not postgres.is_database(uri):
        raise TopologyError("bench capture needs table.source as a postgresql:// URI", file=str(path))
    assert uri is not None
    run_id = uuid.uuid4().hex[:8]
    copy_name = f"streamdetect_bench_{run_id}"
    key = original.table.identifiers[0] if original.table.identifiers else original.table.attributes[0]
    target = next((a for a in original.table.sensitive if a != key), original.table.attributes[-1])
    table = postgres.captured_table(uri, original.table.name, original.table.attributes)
    columns = table.columns
    postgres.execute(
        uri,
        f"CREATE TABLE {copy_name} AS SELECT * FROM {table.schema}.{_q(table.name)}",
        f"CREATE INDEX ON {copy_name} ({_q(columns[key])})",
        f"ALTER TABLE {copy_name} REPLICA IDENTITY FULL",
    )
    with tempfile.TemporaryDirectory(prefix="streamdetect-bench-capture-") as scratch:
        directory = Path(scratch)
        topology = _copy(original, copy_name, directory / "topology.yaml", run_id)
        started: list[subprocess.Popen[bytes]] = []
        port = free_port()
        try:
            worker = _start(
                ["worker", "--metrics-port", str(port), "--datadir", str(directory / "w"), "--coalesce", str(coalesce)],
                topology,
                bootstrap,
                directory,
                "worker",
            )
            started.append(worker)
            while not group_ready(bootstrap, app_id(topology), 1):
                _check(started, directory)
                time.sleep(0.5)
            started.append(_start(["capture"], topology, bootstrap, directory, "capture"))
            running = connect.start(topology, bootstrap, port=free_port())
            snapshot = _rows(uri, copy_name)
            deadline = time.monotonic() + timeout_s
            _settled(bootstrap, topology, running.topic, snapshot, started, directory, deadline)
            before = scrape(port)
            began = time.monotonic()
            changed = _write(uri, copy_name, columns, key, target, changes, rate, batch, seed, mix)
            written = time.monotonic()
            captured, folded = _settled(
                bootstrap, topology, running.topic, snapshot + changed, started, directory, deadline
            )
            samples = {name: value - before.get(name, 0.0) for name, value in scrape(port).items()}
            findings, incomplete = fold_events(read_topic(bootstrap, findings_topic(topology)))
            expected = {finding.id for finding in streamdetect.check(topology).findings}
            return {
                "topology": original.name,
                "table_rows": snapshot,
                "changes": changed,
                "rate": rate,
                "batch": batch,
                "mix": {"updates": mix[0], "inserts": mix[1], "deletes": mix[2]},
                "coalesce": coalesce,
                "write_s": written - began,
                "captured_per_second": changed / (captured - began),
                "folded_per_second": changed / (folded - began),
                "detection_latency_s": quantiles(samples, "streamdetect_detection_latency_seconds", 0.5, 0.99),
                # The worker's time in each check over the changes (its per-check time counter).
                "check_s": check_seconds(samples),
                "findings": len(findings),
                "same_as_check": set(findings) == expected,
                "incomplete": incomplete,
            }
        finally:
            for process in started:
                process.terminate()
            for process in started:
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    process.kill()
            connect.stop(topology, forget=True)
            postgres.execute(uri, f"DROP TABLE IF EXISTS {copy_name}")


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _copy(original: Topology, table: str, path: Path, run_id: str) -> Topology:
    """The topology over the copied table: its views by their attributes and selections (their SQL names
    the original table), under a fresh name."""
    document: dict[str, Any] = {
        "name": f"{original.name}-capture-{run_id}",
        "table": {
            "name": table,
            "attributes": list(original.table.attributes),
            "identifiers": list(original.table.identifiers),
            "sensitive": list(original.table.sensitive),
            "source": original.table.source,
        },
        "views": [
            {
                "name": view.name,
                "attributes": list(view.attributes),
                **({"where": view.where_text} if view.where_text else {}),
            }
            for view in original.views
        ],
        "checks": {check.name: {"k": check.k} for check in original.checks if check.name != "l-diversity"},
    }
    if original.table.types:
        document["table"]["attributes"] = {a: original.table.types.get(a, "str") for a in original.table.attributes}
    if original.table.quasi_identifiers:
        document["table"]["quasi_identifiers"] = list(original.table.quasi_identifiers)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return load_topology(path)


def _start(
    command: list[str], topology: Topology, bootstrap: str, directory: Path, name: str
) -> subprocess.Popen[bytes]:
    assert topology.path is not None
    full = [
        sys.executable,
        "-m",
        "streamdetect",
        command[0],
        topology.path,
        "--bootstrap-servers",
        bootstrap,
        *command[1:],
    ]
    with (directory / f"{name}.log").open("wb") as log:
        return subprocess.Popen(full, stdout=log, stderr=subprocess.STDOUT)


def _check(started: list[subprocess.Popen[bytes]], directory: Path) -> None:
    for process, name in zip(started, ("worker", "capture"), strict=False):
        if process.poll() is not None:
            raise RuntimeError(f"the {name} stopped: {(directory / f'{name}.log').read_text()[-2000:]}")


def _settled(  # noqa: PLR0917 -- private; the run passes its context
    bootstrap: str,
    topology: Topology,
    topic: str,
    events: int,
    started: list[subprocess.Popen[bytes]],
    directory: Path,
    deadline: float,
) -> tuple[float, float]:
    """Wait until the change topic holds ``events`` changes, the capture committed them all, and the worker
    every record they made; the times (monotonic) of the last two."""
    capture_group = f"streamdetect-{topology.name}-capture"
    while committed_lag(bootstrap, capture_group, [topic]) or _end(bootstrap, topic) < events:
        _check(started, directory)
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the changes were not captured in time: {(directory / 'capture.log').read_text()[-2000:]}"
            )
        time.sleep(0.2)
    captured = time.monotonic()
    while committed_lag(bootstrap, app_id(topology), list(input_topics(topology))):
        _check(started, directory)
        if time.monotonic() > deadline:
            raise RuntimeError(f"the records were not folded in time: {(directory / 'worker.log').read_text()[-2000:]}")
        time.sleep(0.2)
    return captured, time.monotonic()


def _end(bootstrap: str, topic: str) -> int:
    from kafka import KafkaConsumer, TopicPartition  # noqa: PLC0415

    from streamdetect.stream.publish import kafka_client  # noqa: PLC0415

    consumer = kafka_client(KafkaConsumer, bootstrap, enable_auto_commit=False)
    try:
        partition = TopicPartition(topic, 0)
        return int(consumer.end_offsets([partition])[partition])
    finally:
        consumer.close()


def _rows(uri: str, table: str) -> int:
    return int(postgres.query(uri, f"SELECT count(*) FROM {table}")[0][0])


def _write(  # noqa: PLR0917 -- private; the run passes its context
    uri: str,
    table: str,
    columns: dict[str, str],
    key: str,
    target: str,
    changes: int,
    rate: float,
    batch: int,
    seed: int,
    mix: tuple[int, int, int],
) -> int:
    """About ``changes`` row changes at ``rate`` per second, ``batch`` per transaction, in the proportions
    ``mix`` of updates of the target attribute, inserts of copies of rows under new keys, and deletes.
    Returns the rows changed (each a change event)."""
    import psycopg  # noqa: PLC0415

    generator = random.Random(seed)
    k, t = _q(columns[key]), _q(columns[target])
    listed = ", ".join(_q(column) for column in columns.values())
    copied_columns = ", ".join("n.new" if column == columns[key] else f"r.{_q(column)}" for column in columns.values())
    with postgres.as_text(psycopg.connect(uri, autocommit=False)) as connection:
        keys = sorted({str(row[0]) for row in connection.execute(f"SELECT {k} FROM {table}").fetchall()})
        values = [row[0] for row in connection.execute(f"SELECT DISTINCT {t} FROM {table}").fetchall()]
        began = time.monotonic()
        done = fresh = 0
        while done < changes:
            size = min(batch, changes - done)
            inserts, deletes = size * mix[1] // sum(mix), size * mix[2] // sum(mix)
            # Distinct keys for the three kinds: a shuffled draw from the keys present, split in three.
            drawn = generator.sample(keys, min(len(keys), size))
            updated, copied = drawn[: size - inserts - deletes], drawn[size - inserts - deletes : size - deletes]
            gone = drawn[size - deletes :]
            new_keys = [f"bench-{fresh + i}" for i in range(len(copied))]
            fresh += len(copied)
            statements = [
                (
                    f"UPDATE {table} SET {t} = v.value FROM (SELECT unnest(%s::text[]) AS k, "
                    f"unnest(%s::text[]) AS value) v WHERE {table}.{k}::text = v.k",
                    (updated, [str(generator.choice(values)) for _ in updated]),
                ),
                (
                    f"INSERT INTO {table} ({listed}) SELECT {copied_columns} FROM {table} r JOIN (SELECT "
                    f"unnest(%s::text[]) AS old, unnest(%s::text[]) AS new) n ON r.{k}::text = n.old",
                    (copied, new_keys),
                ),
                (f"DELETE FROM {table} WHERE {k}::text = ANY(%s)", (gone,)),
            ]
            before = done
            for statement, parameters in statements:
                if parameters[0]:
                    done += connection.execute(statement, parameters).rowcount
            connection.commit()
            if done == before:  # the keys drawn match no row: stop, never loop on
                raise TopologyError(f"bench capture: {size} changes to {table} matched no row (keys {drawn[:3]!r}...)")
            if gone:
                removed = set(gone)
                keys = [key for key in keys if key not in removed]
            keys += new_keys
            ahead = done / rate - (time.monotonic() - began)
            if ahead > 0:
                time.sleep(ahead)
    return done
