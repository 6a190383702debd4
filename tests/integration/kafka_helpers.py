"""What the Kafka worker tests share: Table 1 under a name of its own, a worker in a subprocess, a feed of
records, waiting for a condition."""

from __future__ import annotations

import datetime as dt
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl
from kafka import KafkaProducer

from streamdetect.io.sources import load_views
from streamdetect.io.topology_file import load_topology
from streamdetect.model.topology import Topology
from streamdetect.stream import broker
from streamdetect.stream.metrics import fetch, samples
from streamdetect.stream.publish import create_topics
from streamdetect.stream.records import Publication, encode_publication
from streamdetect.stream.topics import table_topic, view_topic

ROOT = Path(__file__).resolve().parents[2]


def table1_topology(tmp_path: Path, name: str, extra: str = "") -> Path:
    """Table 1's topology under ``name``, with ``extra`` lines appended (``window: 1d``)."""
    source = (ROOT / "topologies" / "dou-patients.yaml").read_text() + extra
    text = source.replace("name: dou-patients", f"name: {name}").replace("data/dou/", f"{ROOT}/topologies/data/dou/")
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


class Subprocess:
    """A streamdetect command running in a subprocess, killed or stopped by a test."""

    process: subprocess.Popen[bytes]

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill()


class Worker(Subprocess):
    """``streamdetect worker`` in a subprocess (its output kept in a file, for a failing test to show)."""

    def __init__(
        self, path: Path, bootstrap: str, home: Path, partitions: int = 1, extra: tuple[str, ...] = ()
    ) -> None:
        name = f"worker-{time.monotonic_ns()}"
        self.log = home / f"{name}.log"
        self.metrics_port = broker.free_port()
        command = [sys.executable, "-m", "streamdetect", "worker", str(path), "--bootstrap-servers", bootstrap]
        command += ["--datadir", str(home / name), "--loglevel", "info", "--metrics-port", str(self.metrics_port)]
        command += ["--partitions", str(partitions), "--session-timeout", "10", *extra]
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def metrics(self) -> dict[str, float]:
        """The samples of its /metrics page (the text kept, for a test to look for values in it)."""
        text = fetch(self.metrics_port)
        self.scraped = getattr(self, "scraped", "") + text
        return samples(text)


class Feed:
    """Sends records of one topology's views."""

    def __init__(self, topology: Topology, bootstrap: str) -> None:
        self.topology = topology
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")

    def send(
        self, view: str, rows: pl.DataFrame, batch: str, op: str = "add", published: dt.datetime | None = None
    ) -> None:
        when = published or dt.datetime.now(dt.UTC)
        publication = Publication(view, op, batch, when, rows)  # type: ignore[arg-type]
        value, headers = encode_publication(publication)
        definition = next(v for v in self.topology.views if v.name == view)
        self.producer.send(view_topic(self.topology, definition), value=value, headers=headers)
        self.producer.flush()

    def send_table(self, rows: pl.DataFrame, batch: str) -> None:
        """Rows of the private table, to its topic."""
        value, headers = encode_publication(Publication(None, "add", batch, dt.datetime.now(dt.UTC), rows))
        self.producer.send(table_topic(self.topology), value=value, headers=headers)
        self.producer.flush()


def until(condition: Callable[[], bool], what: str, worker: Worker, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        assert worker.process.poll() is None, f"the worker exited: {worker.output()[-3000:]}"
        time.sleep(0.5)
    # The log's start too: a worker that never got going says why there, not in its last lines.
    output = worker.output()
    shown = output if len(output) <= 6000 else f"{output[:2500]}\n[...]\n{output[-3500:]}"
    raise AssertionError(f"{what} within {timeout_s:.0f} s; worker output:\n{shown}")


def table1_stream(
    tmp_path: Path,
    name: str,
    bootstrap: str,
    workers: list[Worker],
    partitions: int = 1,
    extra: str = "",
    worker_args: tuple[str, ...] = (),
) -> tuple[Path, Topology, dict[str, pl.DataFrame], Feed]:
    """Table 1 under ``name`` (``extra`` lines added to its topology) with its topics created, a worker
    reading them (added to ``workers``; ``partitions`` its --partitions, ``worker_args`` more options) and
    a feed to send its records: the topology file, the topology, its views' rows, the feed."""
    path = table1_topology(tmp_path, name, extra)
    topology = load_topology(path)
    views = load_views(topology)
    create_topics(topology, bootstrap)
    workers.append(Worker(path, bootstrap, tmp_path, partitions=partitions, extra=worker_args))
    return path, topology, views, Feed(topology, bootstrap)
