"""Loose associations at the scale of De Capitani di Vimercati et al.'s Appendix B (about 100,000 rows,
k = 10): a seeded HOSPITAL-like table (Birth, ZIP | Illness, Doctor) with the constraints c3 and c4 of
Figure 1, grouped by the greedy algorithm and verified, timed; and the utility experiment of Appendix B
(relative error of random COUNT queries answered from the fragments and the association)."""

from __future__ import annotations

import random
import statistics
import time
from typing import Any

import polars as pl

from streamdetect.remediation.loose import Grouping, alike_keys, fragment_codes, greedy_grouping, split_k, verify

LEFT = ["Birth", "ZIP"]
RIGHT = ["Illness", "Doctor"]


def hospital_like(rows: int, seed: int = 0) -> pl.DataFrame:
    """``rows`` rows: Birth (a year, 1930-2005), ZIP (one of 3,000), Illness (one of 60), Doctor (one of 400)."""
    rng = random.Random(seed)
    return pl.DataFrame(
        {
            "Birth": [rng.randint(1930, 2005) for _ in range(rows)],
            "ZIP": [f"{rng.randrange(3000):05d}" for _ in range(rows)],
            "Illness": [f"illness-{rng.randrange(60)}" for _ in range(rows)],
            "Doctor": [f"doctor-{rng.randrange(400)}" for _ in range(rows)],
        }
    )


def keys_of(frame: pl.DataFrame) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
    """Alike keys of the halves under c3 = {Birth, ZIP, Illness} and c4 = {Birth, ZIP, Doctor}."""
    left, right = fragment_codes(frame, LEFT, RIGHT, [[*LEFT, "Illness"], [*LEFT, "Doctor"]])
    return alike_keys(left), alike_keys(right)


def time_loose(rows: int, k: int, *, repeat: int = 3, seed: int = 0) -> dict[str, Any]:
    """Median seconds to group ``rows`` rows k-loosely (alike keys, greedy, verification), and what came out."""
    frame = hospital_like(rows, seed)
    k_left, k_right = split_k(k)
    times: list[float] = []
    grouping: Grouping | None = None
    for _ in range(repeat):
        began = time.perf_counter()
        left, right = keys_of(frame)
        grouping = greedy_grouping(left, right, k_left, k_right)
        problems = verify(grouping, left, right, k)
        times.append(time.perf_counter() - began)
        assert not problems, problems[:3]
    assert grouping is not None
    return {
        "rows": rows,
        "k": k,
        "k_left": k_left,
        "k_right": k_right,
        "suppressed": len(grouping.suppressed),
        "seconds": {"median": statistics.median(times), "runs": times},
        "count_query_error": count_query_error(frame, grouping, seed=seed),
    }


def count_query_error(frame: pl.DataFrame, grouping: Grouping, *, queries: int = 1000, seed: int = 0) -> float:
    """Appendix B's utility: the mean relative error of random COUNT(*) queries
    ``WHERE Birth = b AND Illness = i`` (one left, one right condition) answered from the published data.
    Estimate: each row of a left group matching the left condition is paired, in equal shares, with the
    right halves of the groups its group is paired with (its T); the estimate sums, over such rows, the
    share of its T matching the right condition. Queries with a true count of 0 are skipped."""
    rng = random.Random(seed)
    kept = [i for i, g in enumerate(grouping.left) if g is not None]
    births = frame.get_column("Birth").to_list()
    illnesses = frame.get_column("Illness").to_list()
    members_r: dict[int, list[int]] = {}
    paired: dict[int, set[int]] = {}
    for i in kept:
        members_r.setdefault(grouping.right[i], []).append(i)  # type: ignore[arg-type]
        paired.setdefault(grouping.left[i], set()).add(grouping.right[i])  # type: ignore[arg-type]
    reach = {g: [i for h in hs for i in members_r[h]] for g, hs in paired.items()}
    errors: list[float] = []
    for _ in range(queries * 5):
        if len(errors) >= queries:
            break
        sample = rng.choice(kept)
        birth, illness = births[sample], illnesses[rng.choice(kept)]
        true = sum(1 for i in kept if births[i] == birth and illnesses[i] == illness)
        if not true:
            continue
        estimate = 0.0
        for i in kept:
            if births[i] == birth:
                t = reach[grouping.left[i]]  # type: ignore[index]
                estimate += sum(1 for j in t if illnesses[j] == illness) / len(t)
        errors.append(abs(estimate - true) / true)
    return statistics.fmean(errors) if errors else 0.0
