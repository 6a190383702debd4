"""One timed run of a check, meant to run in a fresh process so that its peak memory is its own.

``python -m streamdetect.bench.runner TOPOLOGY [--k K] [--vs-duckdb SECONDS]`` prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from typing import Any

from streamdetect.check_plan import plan_checks
from streamdetect.checks.findings import LinkageFinding
from streamdetect.checks.linkage import LinkageCheck
from streamdetect.engine import run_checks
from streamdetect.io.sources import load_data
from streamdetect.io.topology_file import load_topology


def _peak_mb() -> float:
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed_run(
    topology_path: str, k: int | None, duckdb_timeout: float | None, checks: list[str] | None = None
) -> dict[str, Any]:
    """Load, check, and optionally run the DuckDB baseline; wall times, peak memory, findings by level."""
    started = time.perf_counter()
    topology = load_topology(topology_path)
    plan = plan_checks(topology, checks, k=k)
    views, table = load_data(topology, with_table=plan.needs_table)
    loaded = time.perf_counter()
    report = run_checks(topology, views, table=table, k=k, plan=plan)
    checked = time.perf_counter()
    outcome: dict[str, Any] = {
        "rows": {name: frame.height for name, frame in views.items()},
        "load_s": loaded - started,
        "check_s": checked - loaded,
        "wall_s": checked - started,
        "peak_mb": _peak_mb(),
        "findings": len(report.findings),
        "by_level": {str(level): count for level, count in report.by_level().items()},
        "by_check": report.by_check(),
        "tasks": sum(summary.tasks for summary in report.checks),
        "searched_below": sum(
            1 for f in report.findings if isinstance(f, LinkageFinding) and f.searched_below is not None
        ),
    }
    if duckdb_timeout is not None:
        # DuckDB is a bench-only extra: imported only when the baseline is asked for.
        from streamdetect.bench.duckdb_baseline import run_baseline  # noqa: PLC0415

        check = LinkageCheck.from_topology(topology, k=k)
        baseline = run_baseline(check, views, timeout=duckdb_timeout)
        ours = {
            (f.identifier_attribute, str(f.identifier_value), f.sensitive_attribute, f.level)
            for f in report.findings
            if isinstance(f, LinkageFinding)
        }
        outcome["duckdb"] = {
            "seconds": baseline.seconds,
            "finished": baseline.finished,
            "timed_out": baseline.timed_out,
            "failed": baseline.failed,
            "timeout_s": duckdb_timeout,
            "slowest": baseline.slowest,
            "agrees": (baseline.findings == ours) if baseline.complete else None,
            "peak_mb_after": _peak_mb(),
        }
    return outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("topology")
    parser.add_argument("--k", type=int)
    parser.add_argument("--vs-duckdb", type=float, dest="duckdb_timeout")
    parser.add_argument("--check", action="append", dest="checks")
    arguments = parser.parse_args()
    print(json.dumps(timed_run(arguments.topology, arguments.k, arguments.duckdb_timeout, arguments.checks)))


if __name__ == "__main__":
    main()
