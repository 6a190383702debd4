"""``streamdetect bench stream``: a worker's throughput and detection latency through a real broker.

A copy of the topology under a fresh name (so its topics and consumer group are new) is published onto
the broker while one ``streamdetect worker`` subprocess reads it; the worker's own Prometheus metrics say
when every row was folded in and how long findings took from publication to the findings topic. At the
end the open findings of the findings topic are compared with ``check`` on the same rows.
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
from streamdetect.io.sources import load_views
from streamdetect.io.topology_file import load_topology
from streamdetect.model.topology import Topology
from streamdetect.stream.broker import free_port
from streamdetect.stream.metrics import scrape
from streamdetect.stream.publish import create_topics, publish, read_topic
from streamdetect.stream.service import open_findings
from streamdetect.stream.topics import findings_topic


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


def _quantile(samples: Mapping[str, float], histogram: str, fraction: float) -> float | None:
    """The upper bound of the bucket holding the ``fraction`` quantile (a bound, as Prometheus' buckets give)."""
    prefix = f'{histogram}_bucket{{le="'
    buckets = sorted(
        (float(name[len(prefix) : -2]), count) for name, count in samples.items() if name.startswith(prefix)
    )
    total = samples.get(f"{histogram}_count", 0.0)
    if not total:
        return None
    for bound, count in buckets:
        if count >= fraction * total:
            return bound
    return None


def run_stream(
    path: Path,
    bootstrap: str,
    *,
    batch_rows: int = 1000,
    rate: float | None = None,
    timeout_s: float = 1800.0,
) -> dict[str, Any]:
    """Publish the topology's views to a fresh set of topics while one worker reads them; measure."""
    with tempfile.TemporaryDirectory(prefix="streamdetect-bench-") as scratch:
        directory = Path(scratch)
        copy = _fresh_copy(path, directory)
        topology = load_topology(copy)
        views = load_views(topology)
        rows = sum(frame.height for frame in views.values())
        create_topics(topology, bootstrap)
        port = free_port()
        command = [sys.executable, "-m", "streamdetect", "worker", str(copy), "--bootstrap-servers", bootstrap]
        command += ["--metrics-port", str(port), "--datadir", str(directory / "worker")]
        with (directory / "worker.log").open("wb") as log:
            worker = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            return _measure(topology, views, bootstrap, worker, port, rows, batch_rows, rate, timeout_s, directory)
        finally:
            worker.terminate()
            try:
                worker.wait(timeout=60)
            except subprocess.TimeoutExpired:
                worker.kill()


def _measure(  # noqa: PLR0917 -- private helper of run_stream, which passes its context
    topology: Topology,
    views: Mapping[str, pl.DataFrame],
    bootstrap: str,
    worker: subprocess.Popen[bytes],
    port: int,
    rows: int,
    batch_rows: int,
    rate: float | None,
    timeout_s: float,
    directory: Path,
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s

    def consumed() -> float:
        samples = scrape(port)
        return sum(value for name, value in samples.items() if name.startswith("streamdetect_rows_consumed_total"))

    while True:  # the worker serves its metrics once it runs
        if worker.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the worker did not start: {(directory / 'worker.log').read_text()[-2000:]}")
        try:
            consumed()
            break
        except OSError:
            time.sleep(0.5)
    began = time.monotonic()
    publish(topology, views, bootstrap, batch_rows=batch_rows, rate=rate)
    published_s = time.monotonic() - began
    first: float | None = None
    while True:
        if worker.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the worker stopped early: {(directory / 'worker.log').read_text()[-2000:]}")
        done = consumed()
        if first is None and done > 0:
            first = time.monotonic()
        if done >= rows:
            break
        time.sleep(0.2)
    ended = time.monotonic()
    samples = scrape(port)
    findings = open_findings(read_topic(bootstrap, findings_topic(topology)))
    expected = {finding.id for finding in streamdetect.check(topology, views).findings}
    return {
        "topology": topology.name,
        "rows": rows,
        "batch_rows": batch_rows,
        "rate": rate,
        "publish_s": published_s,
        "stream_s": ended - began,
        "rows_per_second": rows / (ended - began),
        "detection_latency_s": {
            "p50": _quantile(samples, "streamdetect_detection_latency_seconds", 0.5),
            "p99": _quantile(samples, "streamdetect_detection_latency_seconds", 0.99),
        },
        "batch_s": {"p99": _quantile(samples, "streamdetect_batch_processing_seconds", 0.99)},
        "findings": len(findings),
        "same_as_check": set(findings) == expected,
    }
