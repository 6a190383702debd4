"""K-MSD-AG beside anjana (the maintained Python anonymization library), side by side in one run:
the same table, quasi-identifiers, hierarchies and k; time, information loss (normalized
certainty penalty, discernibility), generalization distance, and the table's FDs after.

anjana's ``k_anonymity`` takes, per quasi-identifier, the hierarchy as aligned columns (level 0 the
original values, level i their generalization); they are built from the topology's ``generalization:``
so both tools generalize along the same functions. Its output's values are mapped back to levels to
measure its loss with the same code as K-MSD's. No row suppression (``supp_level`` 0) for either.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import polars as pl

from streamdetect.model.hierarchies import SUPPRESS
from streamdetect.model.topology import Topology
from streamdetect.relational.dependencies import functional
from streamdetect.remediation.kmsd import Generalized, information_loss, is_k_anonymous, k_msd_ag, prepare


def _summary(
    state: Generalized, quasi: list[str], k: int, released: pl.DataFrame, topology: Topology
) -> dict[str, Any]:
    loss = information_loss(state, quasi)
    return {
        "k_anonymous": is_k_anonymous(state, quasi, k),
        "normalized_certainty_penalty": loss.ncp,
        "discernibility": loss.discernibility,
        "generalization_distance": {a: most for a, (most, _) in loss.distance.items()},
        "functional_dependencies": {
            str(fd): functional(released, fd.lhs, fd.rhs).holds for fd in topology.table.functional_dependencies
        },
    }


def compare_with_anjana(topology: Topology, table: pl.DataFrame, *, k: int = 2, repeat: int = 3) -> dict[str, Any]:
    """Seconds (medians of ``repeat``) and information loss of K-MSD-AG and of anjana's k-anonymity on the
    table's quasi-identifiers. Raises ImportError without anjana."""
    import pandas as pd  # type: ignore[import-untyped]  # noqa: PLC0415 -- optional, loaded only here
    from anjana.anonymity import k_anonymity  # type: ignore[import-untyped]  # noqa: PLC0415

    quasi = list(topology.table.quasi_identifiers)
    columns = {a: table.get_column(a).cast(pl.String).to_list() for a in quasi}
    hierarchies = {a: topology.generalization.get(a, SUPPRESS) for a in quasi}
    fds = [(fd.lhs, fd.rhs) for fd in topology.table.functional_dependencies]

    times, state = [], prepare(columns, hierarchies)
    for _ in range(repeat):
        began = time.perf_counter()
        state = prepare(columns, hierarchies)
        k_msd_ag(state, quasi, k, fds)
        times.append(time.perf_counter() - began)
    ours = table.with_columns(pl.Series(a, state.column(a), dtype=pl.String) for a in quasi)
    outcome: dict[str, Any] = {"rows": table.height, "quasi_identifiers": quasi, "k": k}
    outcome["k-msd-ag"] = {"seconds": statistics.median(times), **_summary(state, quasi, k, ours, topology)}

    frame = pd.DataFrame({c: table.get_column(c).cast(pl.String).to_list() for c in table.columns})
    levels: dict[str, dict[int, Any]] = {}
    for a in quasi:
        originals = sorted({v for v in columns[a] if v is not None})
        height = max((hierarchies[a].height(v) for v in originals), default=1)
        levels[a] = {
            level: pd.Series([hierarchies[a].generalize(v, level) for v in originals]) for level in range(height + 1)
        }
    theirs_times, result = [], frame
    for _ in range(repeat):
        began = time.perf_counter()
        result = k_anonymity(frame, [], quasi, k, 0, levels)
        theirs_times.append(time.perf_counter() - began)
    # anjana returns the rows in table order with generalized values: read each cell's level back.
    theirs = prepare(columns, hierarchies)
    for a in quasi:
        out = result[a].tolist()
        for row, value in enumerate(out):
            original = columns[a][row]
            top = hierarchies[a].height(original) + 1
            theirs.levels[a][row] = next(
                (lv for lv in range(top) if hierarchies[a].generalize(original, lv) == value), top
            )
    # pandas gives missing values as NaN: back to null.
    released = pl.DataFrame(
        {c: [None if pd.isna(v) else str(v) for v in result[c].tolist()] for c in result.columns},
        schema=dict.fromkeys(result.columns, pl.String),
    )
    outcome["anjana"] = {"seconds": statistics.median(theirs_times), **_summary(theirs, quasi, k, released, topology)}
    return outcome
