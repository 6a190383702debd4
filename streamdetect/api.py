"""The Python API for notebooks and pipelines.

>>> import streamdetect
>>> topology = streamdetect.load_topology("topologies/dou-patients.yaml")
>>> report = streamdetect.check(topology)
>>> [(f.identifier_value, f.sensitive_values, f.views) for f in report.findings if f.level == 2]
[('Dan', ('Flu',), ('v1', 'v2'))]
>>> report.exit_code
1
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import polars as pl

from streamdetect.check_plan import plan_checks
from streamdetect.engine import ProgressFactory, Report, run_checks
from streamdetect.io.sources import load_data
from streamdetect.io.topology_file import load_topology as _load_topology
from streamdetect.model.topology import Topology


def load_topology(path: str | Path) -> Topology:
    """Read and validate a topology file (see docs/topology.md); raises TopologyError on bad input."""
    return _load_topology(path)


def check(
    topology: Topology,
    views: Mapping[str, pl.DataFrame] | None = None,
    *,
    checks: Sequence[str] | None = None,
    k: int | None = None,
    max_level: int | None = None,
    progress: ProgressFactory | None = None,
) -> Report:
    """Run the topology's checks. ``views`` defaults to the rows its sources name."""
    plan = plan_checks(topology, checks, k=k, max_level=max_level)
    table = None
    frames: Mapping[str, pl.DataFrame]
    if views is None:
        frames, table = load_data(topology, with_table=plan.needs_table)
    else:
        frames = views
    return run_checks(topology, frames, table=table, k=k, max_level=max_level, progress=progress, plan=plan)
