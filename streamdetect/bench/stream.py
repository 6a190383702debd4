"""``streamdetect bench stream``: a worker's throughput and detection latency through a real broker.

A copy of the topology under a fresh name (so its topics and consumer group are new) is published onto
the broker while one or more ``streamdetect worker`` subprocesses of one group read it; the run ends when
every row was read and the group committed every record (Kafka's committed offsets), and the workers'
own Prometheus metrics say how long findings took from publication to the findings topic. At the end
the open findings of the findings topic are compared with ``check`` on the same rows. When a check run
reads the private table, its rows are published too, to the table's topic, their batches taking their
turn with the views' (as ``publish`` sends them), and counted with the views' rows.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl
import yaml

import streamdetect
from streamdetect.check_plan import table_readers
from streamdetect.io.sources import load_data
from streamdetect.io.topology_file import load_topology
from streamdetect.model.topology import Topology
from streamdetect.stream.broker import free_port
from streamdetect.stream.events import fold_events
from streamdetect.stream.metrics import scrape
from streamdetect.stream.publish import committed_lag, create_topics, group_ready, input_topics, publish, read_topic
from streamdetect.stream.topics import findings_topic, route_topic
from streamdetect.stream.worker import app_id


def _fresh_copy(path: Path, directory: Path) -> Path:
    """The topology file under a new name, its relative sources made absolute."""
    document = yaml.safe_load(path.read_text())
    document["name"] = f"{document.get('name', path.stem)}-bench-{uuid.uuid4().hex[:8]}"
    base = path.resolve().parent
    table = document.get("table", {})
    if table.get("source"):
        table["source"] = str(base / table["source"])
    for view in document.get("views", []):
        if view.get("source"):
            view["source"] = str(base / view["source"])
    copy = directory / "topology.yaml"
    copy.write_text(yaml.safe_dump(document, sort_keys=False))
    return copy


def _quantile(samples: Mapping[str, float], histogram: str, fraction: float) -> tuple[float, float] | None:
    """The ``fraction`` quantile of a histogram's samples: estimated as PromQL's ``histogram_quantile``
    does (linear within the bucket that holds it, from the bucket below's bound, 0 for the first), and
    the upper bound of that bucket (what the histogram proves: at least ``fraction`` of the samples are
    at or under it). None without samples, or when the quantile lies past the last finite bound."""
    prefix = f'{histogram}_bucket{{le="'
    buckets = sorted(
        (float(name[len(prefix) : -2]), count) for name, count in samples.items() if name.startswith(prefix)
    )
    total = samples.get(f"{histogram}_count", 0.0)
    if not total:
        return None
    rank = fraction * total
    lower, below = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if bound == float("inf"):
                return None
            inside = count - below
            return (lower + (bound - lower) * (rank - below) / inside if inside else bound), bound
        lower, below = bound, count
    return None


def check_seconds(samples: Mapping[str, float]) -> dict[str, float]:
    """Seconds the workers spent in each check (``streamdetect_check_seconds_total``), by check."""
    prefix = 'streamdetect_check_seconds_total{check="'
    return {name[len(prefix) : -2]: value for name, value in samples.items() if name.startswith(prefix)}


def quantiles(samples: Mapping[str, float], histogram: str, *fractions: float) -> dict[str, float | None]:
    """``p50``, ``p99``...: the estimates of :func:`_quantile`, each with its bucket's bound
    (``p99_le``)."""
    figures: dict[str, float | None] = {}
    for fraction in fractions:
        name = f"p{round(fraction * 100)}"
        found = _quantile(samples, histogram, fraction)
        figures[name], figures[f"{name}_le"] = found if found is not None else (None, None)
    return figures


def run_stream(
    path: Path,
    bootstrap: str,
    *,
    batch_rows: int = 1000,
    rate: float | None = None,
    workers: int = 1,
    partitions: int | None = None,
    timeout_s: float = 1800.0,
    coalesce: int = 32,
    prefix: float = 0.0,
) -> dict[str, Any]:
    """Publish the topology's views to a fresh set of topics while ``workers`` workers of one group read
    them, the work split in ``partitions`` (default: as many as workers; the view topics get as many);
    measure until the group has committed every record of the view (and route) topics. ``coalesce``: the
    workers' ``--coalesce``. ``prefix``: that fraction of each view's rows is published first, as fast as
    it goes, and folded in before the measured stream of the rest starts (a worker in its steady state,
    as ``bench incremental --prefix``; the figures then count the rest only: rows, rows per second, and
    latency from the histograms' growth during it)."""
    partitions = partitions or workers
    with tempfile.TemporaryDirectory(prefix="streamdetect-bench-") as scratch:
        directory = Path(scratch)
        copy = _fresh_copy(path, directory)
        topology = load_topology(copy)
        readers = table_readers(topology)
        views, table = load_data(topology, with_table=bool(readers))
        create_topics(topology, bootstrap, partitions)
        started: list[tuple[subprocess.Popen[bytes], int]] = []
        try:
            for number in range(workers):
                port = free_port()
                command = [sys.executable, "-m", "streamdetect", "worker", str(copy), "--bootstrap-servers", bootstrap]
                command += ["--metrics-port", str(port), "--datadir", str(directory / f"worker-{number}")]
                command += ["--partitions", str(partitions), "--loglevel", "info", "--coalesce", str(coalesce)]
                with (directory / f"worker-{number}.log").open("wb") as log:
                    started.append((subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT), port))
            inputs: dict[str | None, pl.DataFrame] = {}
            inputs.update(views)
            if readers and table is not None:
                inputs[None] = table
            run = _Run(topology, inputs, bootstrap, started, directory, time.monotonic() + timeout_s)
            return run.measure(batch_rows, rate, partitions, prefix) | {"coalesce": coalesce, "prefix": prefix}
        finally:
            for worker, _ in started:
                worker.terminate()
            for worker, _ in started:
                try:
                    worker.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    worker.kill()


class _Run:
    """One measurement: the workers started, the topology's rows (the views', and the table's under None
    when a check reads it), the deadline."""

    def __init__(  # noqa: PLR0917 -- private; run_stream passes its context
        self,
        topology: Topology,
        views: Mapping[str | None, pl.DataFrame],
        bootstrap: str,
        workers: list[tuple[subprocess.Popen[bytes], int]],
        directory: Path,
        deadline: float,
    ) -> None:
        self.topology, self.views, self.bootstrap = topology, views, bootstrap
        self.workers, self.directory, self.deadline = workers, directory, deadline
        self.rows = sum(frame.height for frame in views.values())

    def _alive(self, what: str) -> None:
        for number, (worker, _) in enumerate(self.workers):
            if worker.poll() is not None or time.monotonic() > self.deadline:
                log = (self.directory / f"worker-{number}.log").read_text()[-2000:]
                raise RuntimeError(f"worker {number} {what}: {log}")

    def samples(self) -> dict[str, float]:
        """Every worker's samples, summed by name (counters and histogram buckets add up). A worker that
        does not answer is reported with the end of its log (it died, or is too busy to answer)."""
        total: dict[str, float] = {}
        for number, (_, port) in enumerate(self.workers):
            try:
                scraped = scrape(port)
            except OSError as failed:
                time.sleep(1.0)  # a dying worker's exit is seen a moment later
                self._alive("stopped")
                log = (self.directory / f"worker-{number}.log").read_text()[-2000:]
                raise RuntimeError(f"worker {number}'s metrics did not answer ({failed}): {log}") from None
            for name, value in scraped.items():
                total[name] = total.get(name, 0.0) + value
        return total

    def consumed(self) -> float:
        return sum(v for name, v in self.samples().items() if name.startswith("streamdetect_rows_consumed_total"))

    def _drained(self, rows: float, topics: list[str]) -> float:
        """Wait until ``rows`` rows were folded in (and their outputs delivered: the workers count them
        then) and the group committed every record of ``topics`` (Faust commits every 2.8 s: the end is
        known to that precision, for one worker and several alike). Returns when the rows were folded
        in (monotonic seconds, to the 0.2 s the workers' counters are polled at: each poll is a scrape,
        which the workers answer with their own CPU)."""
        while self.consumed() < rows:
            self._alive("stopped early")
            time.sleep(0.2)
        folded = time.monotonic()
        while committed_lag(self.bootstrap, app_id(self.topology), topics):
            self._alive("stopped early")
            time.sleep(0.2)
        return folded

    def measure(self, batch_rows: int, rate: float | None, partitions: int, prefix: float) -> dict[str, Any]:
        # Publishing starts once every worker has joined the group and has partitions (a rebalance while
        # rows arrive would be measured as latency; bench the steady state).
        while not group_ready(self.bootstrap, app_id(self.topology), len(self.workers)):
            self._alive("did not start")
            time.sleep(0.5)
        topics = list(input_topics(self.topology))
        topics += [route_topic(self.topology)] if partitions > 1 else []
        loaded = {name: frame.head(int(frame.height * prefix)) for name, frame in self.views.items()}
        rest = {name: frame.slice(loaded[name].height) for name, frame in self.views.items()}

        def send(part: Mapping[str | None, pl.DataFrame], pace: float | None) -> None:
            views = {name: frame for name, frame in part.items() if name is not None}
            table = part.get(None)
            publish(
                self.topology,
                views,
                self.bootstrap,
                batch_rows=batch_rows,
                rate=pace,
                partitions=partitions,
                table=table,
            )

        before: dict[str, float] = {}
        if prefix:
            send(loaded, None)
            self._drained(sum(frame.height for frame in loaded.values()), topics)
            before = self.samples()
        began = time.monotonic()
        send(rest, rate)
        published_s = time.monotonic() - began
        folded = self._drained(self.rows, topics)
        ended = time.monotonic()
        # What the measured stream added to every counter and bucket.
        samples = {name: value - before.get(name, 0.0) for name, value in self.samples().items()}
        findings, incomplete = fold_events(read_topic(self.bootstrap, findings_topic(self.topology)))
        expected = {finding.id for finding in streamdetect.check(self.topology).findings}
        streamed = sum(frame.height for frame in rest.values())
        return {
            "topology": self.topology.name,
            "rows": streamed,
            "table_rows": rest[None].height if None in rest else 0,
            "prefix_rows": self.rows - streamed,
            "workers": len(self.workers),
            "partitions": partitions,
            "batch_rows": batch_rows,
            "rate": rate,
            "publish_s": published_s,
            "stream_s": ended - began,
            "rows_per_second": streamed / (ended - began),
            # Until every row was folded in and delivered, not until Faust's next commit (every 2.8 s):
            # the workers' rate (with --rate, at most the publication's). One stage only: with a route
            # stage the rows are counted when routed, before the units fold them.
            "folded_rows_per_second": streamed / (folded - began) if partitions == 1 else None,
            "detection_latency_s": quantiles(samples, "streamdetect_detection_latency_seconds", 0.5, 0.99),
            "batch_s": quantiles(samples, "streamdetect_batch_processing_seconds", 0.99),
            # The workers' time in each check over the measured stream (their per-check time counter).
            "check_s": check_seconds(samples),
            "findings": len(findings),
            "same_as_check": set(findings) == expected,
            "incomplete": incomplete,
        }
