"""Table k-anonymity and l-diversity against pycanon, side by side in one run.

Both measure the same thing on the same rows: the base table grouped by its quasi-identifiers (pycanon's
``k_anonymity`` returns the smallest group, ``l_diversity`` the fewest distinct sensitive values in a
group; streamdetect's check finds every group below the threshold, through the check protocol). The
timed streamdetect step is one ``update`` of an empty state with the table's rows, up to its findings
counted; building every finding as a Python object is timed apart (``materialise``), as pycanon builds
none. pycanon reads a pandas DataFrame, built before timing (its conversion is not counted).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import polars as pl

from streamdetect.checks.table.anonymity import TableAnonymity
from streamdetect.model.batch import Batch
from streamdetect.model.topology import Topology


def _median(run: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        began = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - began)
    return statistics.median(times), result


def compare_with_pycanon(topology: Topology, table: pl.DataFrame, *, k: int = 2, repeat: int = 3) -> dict[str, Any]:
    """Seconds (medians of ``repeat``) of streamdetect's table checks and pycanon's on the table's
    quasi-identifiers and sensitive attributes, and the ratios. Raises ImportError without pycanon."""
    import pandas as pd  # type: ignore[import-untyped]  # noqa: PLC0415 -- optional, loaded only here
    from pycanon import anonymity  # type: ignore[import-untyped]  # noqa: PLC0415

    quasi = list(topology.table.quasi_identifiers)
    sensitive = list(topology.table.sensitive)
    frame = pd.DataFrame({name: table.get_column(name).to_list() for name in [*quasi, *sensitive]})
    outcome: dict[str, Any] = {"rows": table.height, "quasi_identifiers": quasi, "sensitive": sensitive, "k": k}
    for criterion in ("table-k-anonymity", "l-diversity"):
        check = TableAnonymity(topology, criterion, k)
        batch = Batch(table=table)

        def ours(check: TableAnonymity = check, batch: Batch = batch) -> int:
            return len(check.update(check.initialize(), batch).raised)

        def built_all(check: TableAnonymity = check, batch: Batch = batch) -> int:
            return len(list(check.update(check.initialize(), batch).raised))

        seconds, findings = _median(ours, repeat)
        built, _ = _median(built_all, repeat)
        if criterion == "table-k-anonymity":
            theirs, value = _median(lambda: anonymity.k_anonymity(frame, quasi), repeat)
        else:
            theirs, value = _median(lambda: anonymity.l_diversity(frame, quasi, sensitive), repeat)
        outcome[criterion] = {
            "streamdetect_s": seconds,
            "findings": findings,
            "with_findings_built_s": built,
            "pycanon_s": theirs,
            "pycanon_value": int(value),
            "ratio": theirs / seconds if seconds else None,
        }
    return outcome
