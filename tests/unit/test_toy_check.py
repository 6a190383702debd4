"""A new check is one module plus one registration: a toy check, registered here and nowhere else, is run
by ``check`` (human, JSON, Markdown, JUnit), explained by ``explain``, kept by the Detector (snapshot and
restore) and counted by the worker's metrics, with no line of streamdetect naming it."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from streamdetect.checks import registry
from streamdetect.checks.findings import Delta, Finding, diff
from streamdetect.checks.presentation import Block, Section, Shown
from streamdetect.checks.protocol import CheckProperties, CheckSummary, ProgressFactory
from streamdetect.cli.main import cli
from streamdetect.detector import Detector
from streamdetect.io.sources import load_views
from streamdetect.io.topology_file import load_topology
from streamdetect.model.batch import Batch
from streamdetect.model.topology import Topology
from streamdetect.stream.metrics import WorkerMetrics

TOY = "lone-view"
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class ThinView(Finding):
    """A view holding fewer than k rows (the toy criterion)."""

    k: int
    view: str
    rows: int
    check = TOY
    certain = True

    @property
    def views(self) -> tuple[str, ...]:
        return (self.view,)

    @property
    def subject(self) -> tuple[Any, ...]:
        return (self.check, self.view)

    def to_dict(self) -> dict[str, Any]:
        return self._identified({"check": self.check, "k": self.k, "view": self.view, "rows": self.rows})

    def headline(self) -> str:
        return f"view {self.view} holds {self.rows} row(s)"

    def verdict(self) -> str:
        return f"fewer than k = {self.k} rows"


@dataclass(frozen=True)
class ThinViews:
    """The toy check: a view with fewer than k rows present. Its state: rows per view."""

    topology: Topology
    k_override: int | None = None
    name = TOY
    properties = CheckProperties(needs_table=False)

    @classmethod
    def from_topology(cls, topology: Topology, k: int | None = None, max_level: int | None = None) -> ThinViews:
        del max_level
        return cls(topology, k)

    @property
    def k(self) -> int:
        return self.topology.threshold(TOY, self.k_override)

    def initialize(self) -> dict[str, int]:
        return {}

    def validate(self, state: dict[str, int], batch: Batch) -> str | None:
        return None

    def update(self, state: dict[str, int], batch: Batch, progress: ProgressFactory | None = None) -> Delta[ThinView]:
        before = self.result(state)
        for view, frame in batch.views.items():
            state[view] = state.get(view, 0) + frame.height
        return diff(before, self.result(state))

    def merge(self, state: dict[str, int], other: dict[str, int]) -> Delta[ThinView]:
        return self.update(state, Batch(views={view: pl.DataFrame({"n": [0] * n}) for view, n in other.items()}))

    def result(self, state: dict[str, int]) -> list[ThinView]:
        return [ThinView(self.k, view, rows) for view, rows in sorted(state.items()) if 0 < rows < self.k]

    def encode(self, state: dict[str, int]) -> bytes:
        return json.dumps({"version": 1, "rows": state}).encode()

    def decode(self, data: bytes | memoryview) -> dict[str, int]:
        return dict(json.loads(bytes(data))["rows"])

    def changes(self, state: dict[str, int]) -> dict[str, bytes]:
        return {"rows": self.encode(state)}

    def apply_changes(self, state: dict[str, int], pieces: Mapping[str, bytes]) -> dict[str, int]:
        return self.decode(pieces["rows"]) if "rows" in pieces else state

    def summary(self, findings: int) -> CheckSummary:
        views = len(self.topology.views)
        return CheckSummary(TOY, self.k, views, views, findings)


def section(summary: CheckSummary, findings: Sequence[ThinView], shown: Shown) -> Section:
    """The toy check's section of a report."""
    rows = [(shown.number(f), shown.marked_id(f), f.view, str(f.rows)) for f in findings]
    block = Block(f"thin views: {len(findings)} finding(s)", ("#", "id", "view", "rows"), *shown.cut(rows))
    return Section(f"{TOY} (k = {summary.k}): views with fewer than k rows", (block,))


def explain(
    topology: Topology, views: Mapping[str, pl.DataFrame], table: pl.DataFrame | None, finding: ThinView
) -> list[tuple[str, pl.DataFrame]]:
    """The view's rows."""
    return [(f"the rows of thin view {finding.view}", views[finding.view])]


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The toy check registered, and Table 1's topology running it alone with k = 7 (its views hold six
    rows each: both are thin)."""
    here = "tests.unit.test_toy_check"
    entry = registry.Registration(f"{here}:ThinViews.from_topology", f"{here}:section", f"{here}:explain")
    monkeypatch.setitem(registry.REGISTRY, TOY, entry)
    text = (ROOT / "topologies" / "dou-patients.yaml").read_text()
    text = text.replace("data/dou/", f"{ROOT}/topologies/data/dou/").replace("linkage: {k: 2}", f"{TOY}: {{k: 7}}")
    path = tmp_path / "toy.yaml"
    path.write_text(text)
    return path


def test_check_reports_the_toy_check_in_every_format(toy: Path) -> None:
    runner = CliRunner()
    done = runner.invoke(cli, ["check", str(toy), "--json"])
    assert done.exit_code == 1, done.output
    report = json.loads(done.output)
    assert report["checks"] == [{"name": TOY, "k": 7, "channels": 2, "tasks": 2, "findings": 2}]
    assert [(f["check"], f["view"], f["rows"]) for f in report["findings"]] == [(TOY, "v1", 6), (TOY, "v2", 6)]
    assert report["summary"]["by_check"] == {TOY: 2}
    human = runner.invoke(cli, ["check", str(toy)]).output
    assert f"{TOY} (k = 7): views with fewer than k rows" in human
    assert "thin views: 2 finding(s)" in human
    markdown = runner.invoke(cli, ["check", str(toy), "--format", "markdown"]).output
    assert "thin views: 2 finding(s)" in markdown
    junit = runner.invoke(cli, ["check", str(toy), "--format", "junit"]).output
    first = report["findings"][0]["id"]
    assert f'name="view v1 holds 6 row(s) [{first}]"' in junit
    assert 'message="fewer than k = 7 rows"' in junit


def test_explain_uses_the_toy_explainer(toy: Path) -> None:
    done = CliRunner().invoke(cli, ["explain", str(toy), "--finding", "2", "--json"])
    assert done.exit_code == 0, done.output
    explained = json.loads(done.output)
    assert explained["finding"]["view"] == "v2"
    assert [section["title"] for section in explained["explanation"]] == ["the rows of thin view v2"]
    assert len(explained["explanation"][0]["rows"]) == 6


def test_the_detector_keeps_the_toy_state_and_the_worker_metrics_count_its_findings(toy: Path) -> None:
    topology = load_topology(toy)
    views = load_views(topology)
    detector = Detector(topology)
    assert list(detector.checks) == [TOY]
    delta = detector.update(Batch(views={"v1": views["v1"].head(3)}))
    assert [(f.check, f.view, f.rows) for f in delta.raised] == [(TOY, "v1", 3)]
    restored = Detector(topology)
    restored.restore(detector.snapshot())
    assert restored.findings() == detector.findings()
    metrics = WorkerMetrics()
    metrics.findings(delta.raised, (), dt.datetime.now(dt.UTC))
    sample = metrics.registry.get_sample_value(
        "streamdetect_open_findings", {"check": TOY, "level": "", "certain": "true"}
    )
    assert sample == 1.0


def test_no_toy_without_its_registration(tmp_path: Path) -> None:
    """The registration is what makes it a check: without it the topology is refused."""
    text = (ROOT / "topologies" / "dou-patients.yaml").read_text().replace("linkage: {k: 2}", f"{TOY}: {{k: 7}}")
    path = tmp_path / "toy.yaml"
    path.write_text(text)
    done = CliRunner().invoke(cli, ["check", str(path)])
    assert done.exit_code == 2
    assert f"checks.{TOY}: unknown check" in done.output
