"""streamdetect's findings equal those of naive SQL over materialised natural joins in DuckDB (small BP)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamdetect.bench.bp import generate_bp, write_bp
from streamdetect.bench.duckdb_baseline import run_baseline
from streamdetect.checks.linkage import LinkageCheck
from streamdetect.io.sources import load_views
from streamdetect.io.topology_file import load_topology
from tests.registered import run_linkage


@pytest.mark.parametrize(("seed", "k"), [(1, 2), (2, 3), (3, 5)])
def test_bp_findings_agree_with_duckdb(tmp_path: Path, seed: int, k: int) -> None:
    table, _ = generate_bp(rows=250, seed=seed, adult_source="synthetic")
    topology = load_topology(write_bp(table, tmp_path))
    views = load_views(topology)
    check = LinkageCheck.from_topology(topology, k=k)
    baseline = run_baseline(check, views, timeout=60)
    assert baseline.complete
    ours = {
        (f.identifier_attribute, str(f.identifier_value), f.sensitive_attribute, f.level)
        for f in run_linkage(check, views)
    }
    assert ours == baseline.findings
    assert ours  # the benchmark does disclose
