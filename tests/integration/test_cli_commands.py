"""The commands a user runs, end to end through the installed entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl

from streamdetect.bench.incremental import micro_batches, with_withdrawals
from streamdetect.detector import Detector
from streamdetect.io.sources import load_views
from streamdetect.io.topology_file import load_topology
from streamdetect.model.batch import Batch
from streamdetect.partitioning import plan
from streamdetect.relational.bags import remove_occurrences

ROOT = Path(__file__).resolve().parents[2]


def _run(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streamdetect", *arguments], capture_output=True, text=True, check=False, cwd=ROOT
    )


def test_every_shipped_topology_checks_with_the_documented_exit_code() -> None:
    for topology in sorted((ROOT / "topologies").glob("*.yaml")):
        result = _run("check", str(topology), "--json")
        assert result.returncode in (0, 1), result.stderr
        document = json.loads(result.stdout)
        assert (result.returncode == 1) == bool(document["findings"])


def test_closure_writes_the_universal_relation(tmp_path: Path) -> None:
    out = tmp_path / "merged.parquet"
    result = _run("closure", str(ROOT / "topologies" / "dou-patients.yaml"), "--universal", str(out), "--max-rows", "4")
    assert result.returncode == 0, result.stderr
    merged = pl.read_parquet(out)
    assert set(merged.get_column("_channel").unique()) == {"{v1}", "{v2}", "{v1, v2}"}
    assert merged.filter(pl.col("_channel") == "{v1, v2}").height == 4
    assert merged.columns[:7] == ["SSN", "Name", "ZIP", "DOB", "Sex", "Job", "Disease"]


def test_bench_generate_and_run(tmp_path: Path) -> None:
    generated = _run("bench", "generate", "bp", "--rows", "150", "--adult", "synthetic", str(tmp_path))
    assert generated.returncode == 0, generated.stderr
    result = _run("bench", "run", str(tmp_path / "bp.yaml"), "--repeat", "1", "--vs", "duckdb", "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["runs"][0]["tasks"] == 75
    assert document["duckdb"]["agrees"] is True


def test_bench_incremental_ends_in_the_findings_of_a_batch_check() -> None:
    topology = str(ROOT / "topologies" / "dou-chain.yaml")
    result = _run("bench", "incremental", topology, "--batch-rows", "1", "--prefix", "0.3", "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["batches"] > 1
    assert set(document["batch_ms"]) == {"p50", "p99", "max"}
    assert document["batch_ms"]["p50"] <= document["batch_ms"]["max"]
    # Every view publishes batches after the prefix (round-robin), each timed under the overall max.
    by_view = document["batch_ms_by_view"]
    assert set(by_view) == {view.name for view in load_topology(Path(topology)).views}
    assert all(0 <= ms <= document["batch_ms"]["max"] for ms in by_view.values())
    assert document["rows_per_second"] > 0
    assert document["state_bytes"] > 0
    report = json.loads(_run("check", topology, "--json").stdout)
    assert sorted(f["id"] for f in document["findings"]) == sorted(f["id"] for f in report["findings"])


def test_bench_partition_measures_every_unit_of_the_plan_beside_one_detector() -> None:
    path = ROOT / "topologies" / "dou-patients.yaml"
    result = _run("bench", "partition", str(path), "--partitions", "3", "--batch-rows", "2", "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["partitions"] == 3
    assert document["findings_equal"] is True
    assert document["single"]["cpu_s"] > 0
    assert document["single"]["peak_state_bytes"] > 0
    # Two identifiers over three partitions: two value buckets each, placed round the partitions.
    units = {unit["name"]: unit for unit in document["units"]}
    assert set(units) == {"SSN/0", "SSN/1", "Name/0", "Name/1"}
    assert {unit["partition"] for unit in units.values()} == {0, 1, 2}
    assert all(unit["cpu_s"] > 0 and unit["peak_state_bytes"] > 0 for unit in units.values())
    largest = max(unit["cpu_s"] for unit in units.values())
    assert document["largest_cpu_share"] == largest / document["single"]["cpu_s"]
    # Per partition, its units summed: what the worker holding it folds.
    held = {row["partition"]: row["cpu_s"] for row in document["by_partition"]}
    assert held == {p: sum(u["cpu_s"] for u in units.values() if u["partition"] == p) for p in range(3)}
    assert document["largest_partition_cpu_share"] == max(held.values()) / document["single"]["cpu_s"]
    text = _run("bench", "partition", str(path), "--partitions", "3", "--batch-rows", "2")
    assert text.returncode == 0, text.stderr
    assert "the units' findings equal one Detector's" in text.stdout
    assert "busiest partition" in text.stdout
    # With k-anonymity: a unit per (identifier, sensitive) pair beside linkage's.
    mixed = _run(
        "bench", "partition", str(path), "--partitions", "4", "--check", "linkage", "--check", "k-anonymity", "--json"
    )
    assert mixed.returncode == 0, mixed.stderr
    named = {unit["name"] for unit in json.loads(mixed.stdout)["units"]}
    assert named == {"SSN/0", "Name/0", "#k-anonymity/SSN/Disease", "#k-anonymity/Name/Disease"}


def test_bench_unit_folds_one_unit_as_a_worker_and_restores_it_in_a_fresh_process() -> None:
    path = ROOT / "topologies" / "dou-patients.yaml"
    topology = load_topology(path)
    split = plan(topology, 3)
    unit = next(unit for unit in split.units() if unit.name == "SSN/0")
    shares = [split.split_batch(batch).get(unit) for batch in micro_batches(load_views(topology), 0, 2)]
    rows = sum(frame.height for share in shares if share is not None for frame in share.views.values())
    for store in ("memory://", "rocksdb://"):
        result = _run(
            "bench", "unit", str(path), "--partitions", "3", "--unit", "SSN/0", "--batch-rows", "2", "--store", store,
            "--json",
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        document = json.loads(result.stdout)
        assert (document["unit"], document["store"], document["rows"]) == ("SSN/0", store, rows)
        assert document["state_bytes"] > 0
        assert document["table_bytes"] > 0
        assert document["open_findings"] > 0
        assert document["findings_restored"] is True
        phases = document["phases"]
        assert set(phases) == {"fold", "withdraw", "snapshot", "restore"}
        assert phases["fold"]["peak_bytes"] >= document["baseline_bytes"]
        assert all(phase["peak_bytes"] >= phase["end_bytes"] > 0 for phase in phases.values())
        assert document["peak_bytes"] == max(phase["peak_bytes"] for phase in phases.values())
    text = _run("bench", "unit", str(path), "--partitions", "3", "--unit", "SSN/0", "--batch-rows", "2")
    assert text.returncode == 0, text.stderr
    assert "restoring (a fresh process): at most" in text.stdout
    unknown = _run("bench", "unit", str(path), "--partitions", "3")
    assert unknown.returncode == 2
    assert "--unit is needed" in unknown.stderr
    assert "SSN/0, SSN/1, Name/0, Name/1" in unknown.stderr


def test_bench_incremental_with_withdrawals_ends_in_the_findings_of_the_rows_present() -> None:
    path = ROOT / "topologies" / "dou-chain.yaml"
    result = _run(
        "bench", "incremental", str(path), "--batch-rows", "2", "--prefix", "0.5", "--retract", "0.5", "--json"
    )
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["withdrawn_rows"] > 0
    # The same stream in-process: the rows still present after it, checked in one batch.
    topology = load_topology(path)
    views = load_views(topology)
    start = int(min(frame.height for frame in views.values()) * 0.5)
    present = {name: frame.head(start) for name, frame in views.items()}
    for batch in with_withdrawals(views, start, 2, 0.5):
        for name, rows in batch.retracted.items():
            present[name] = remove_occurrences(present[name], rows, name)
        for name, rows in batch.views.items():
            present[name] = pl.concat([present[name], rows])
    detector = Detector(topology)
    detector.update(Batch(views=present))
    assert sorted(f["id"] for f in document["findings"]) == sorted(f.id for f in detector.findings())


def test_bench_run_times_publisher_side_checks() -> None:
    result = _run(
        "bench", "run", str(ROOT / "topologies" / "sind-figure4.yaml"), "--check", "sind", "--repeat", "1", "--json"
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["runs"][0]["by_check"] == {"sind": 2}


def test_help_lists_the_four_exit_codes() -> None:
    for command in ([], ["check"], ["explain"]):
        result = _run(*command, "--help")
        assert result.returncode == 0
        text = " ".join(result.stdout.split())
        for code in ("0 nothing found", "1 findings that fail the run", "2 bad input", "3 internal error"):
            assert code in text, (command, code)


def test_bench_many_views_times_the_check_of_the_generated_history(tmp_path: Path) -> None:
    """Sixteen views (a closure of thousands of channels): the timed run and `check` over the same generated
    files report the same findings."""
    generated = _run("bench", "generate", "many-views", str(tmp_path), "--views", "16", "--rows", "300")
    assert generated.returncode == 0, generated.stderr
    checked = _run("check", str(tmp_path / "many-views.yaml"), "--json")
    assert checked.returncode == 1, checked.stderr
    findings = json.loads(checked.stdout)["findings"]
    timed = _run("bench", "many-views", "--views", "16", "--rows", "300", "--repeat", "1", "--json")
    assert timed.returncode == 0, timed.stderr
    run = json.loads(timed.stdout)["runs"][0]
    assert run["findings"] == len(findings)
    assert run["by_level"] == {
        str(level): sum(1 for f in findings if f["level"] == level) for level in sorted({f["level"] for f in findings})
    }
