"""A real Prometheus (Debian's package) scrapes a worker: every query of the dashboard and of the alert
rules returns a series. Skipped without the prometheus binary."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

import streamdetect
from streamdetect.io.sources import load_data
from streamdetect.stream import broker
from streamdetect.stream.events import open_findings
from streamdetect.stream.publish import read_topic
from streamdetect.stream.topics import findings_topic
from tests.integration.kafka_helpers import Worker, table1_stream, until

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus missing: apt install prometheus")


def _queries() -> list[str]:
    dashboard = json.loads((ROOT / "deploy" / "grafana" / "dashboards" / "streamdetect.json").read_text())
    queries = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    rules = yaml.safe_load((ROOT / "deploy" / "prometheus" / "alerts.yml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            # An alert's condition holds only when it fires: its left-hand side must return a series.
            queries.append(re.split(r"\s(?:>|==|<)\s", rule["expr"])[0])
    return queries


def _query(port: int, expr: str) -> list[object]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as page:
        answer = json.loads(page.read())
    assert answer["status"] == "success", answer
    return list(answer["data"]["result"])


def test_prometheus_scrapes_a_worker_and_every_query_returns_a_series(
    kafka_bootstrap: str, tmp_path: Path, workers: list[Worker]
) -> None:
    # Table k-anonymity too, which reads the private table: its topic and the inputs-missing gauge exist.
    extra = "  table-k-anonymity: {k: 2}\n"
    _, topology, views, feed = table1_stream(tmp_path, "scraped", kafka_bootstrap, workers, extra=extra)
    for name, frame in views.items():
        for position in range(frame.height):
            feed.send(name, frame.slice(position, 1), f"{name}-{position}")
    table = load_data(topology)[1]
    assert table is not None
    feed.send_table(table, "table")
    feed.send("v1", views["v1"].head(1), "v1-0")  # a replay
    feed.producer.send("streamdetect.scraped.view.v1", value=b"poison", headers=[])
    feed.producer.flush()
    expected = len(streamdetect.check(topology).findings)
    until(
        lambda: len(open_findings(read_topic(kafka_bootstrap, findings_topic(topology)))) == expected,
        "every finding",
        workers[-1],
    )

    port = broker.free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(ROOT / "deploy" / "prometheus" / "alerts.yml")],
                "scrape_configs": [
                    {
                        "job_name": "streamdetect",
                        "static_configs": [{"targets": [f"127.0.0.1:{workers[-1].metrics_port}"]}],
                    }
                ],
            }
        )
    )
    command = ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}"]
    command += [f"--web.listen-address=127.0.0.1:{port}"]
    with (tmp_path / "prometheus.log").open("wb") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        missing = _queries()
        while missing and time.monotonic() < deadline:
            time.sleep(2)
            try:
                missing = [expr for expr in missing if not _query(port, expr)]
            except OSError:
                continue  # not listening yet
        assert not missing, f"no series for {missing}; {(tmp_path / 'prometheus.log').read_text()[-2000:]}"
    finally:
        server.terminate()
        server.wait(timeout=30)
