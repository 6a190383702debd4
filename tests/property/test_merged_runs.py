"""Records folded together in runs (additions and withdrawals of the same view netted in order) leave the
worker where folding them one by one does: the same findings, and the same records refused.

Reference: a service handling each record alone. Strategies draw withdrawals of rows the run added before
them, of rows published before the run, of rows never published (refused), views emptied and refilled,
and repeated rows; the k-anonymity check (association covers, recomputed on a withdrawal) and linkage.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

import streamdetect
from streamdetect.io.sources import load_views
from streamdetect.stream.records import Publication, encode_publication
from streamdetect.stream.service import DetectorService

ROOT = Path(__file__).resolve().parents[2]
WHEN = dt.datetime(2026, 11, 29, tzinfo=dt.UTC)
TOPOLOGY = streamdetect.load_topology(ROOT / "topologies" / "dou-patients.yaml")
VIEWS = load_views(TOPOLOGY)


@st.composite
def records(draw: st.DrawFn, prefix: str) -> list[tuple[bytes, list[tuple[str, bytes]], None]]:
    drawn = []
    for number in range(draw(st.integers(1, 10))):
        view = draw(st.sampled_from(sorted(VIEWS)))
        frame = VIEWS[view]
        positions = draw(st.lists(st.integers(0, frame.height - 1), min_size=1, max_size=3))
        op = draw(st.sampled_from(["add", "add", "retract"]))
        rows = frame[positions]
        value, headers = encode_publication(Publication(view, op, f"{prefix}{number}", WHEN, rows))  # type: ignore[arg-type]
        drawn.append((value, headers, None))
    return drawn


@settings(max_examples=150, deadline=None)
@given(first=records("a"), second=records("b"), checks=st.sampled_from([["linkage"], ["linkage", "k-anonymity"]]))
def test_runs_folded_together_equal_records_folded_one_by_one(
    first: list[tuple[bytes, list[tuple[str, bytes]], None]],
    second: list[tuple[bytes, list[tuple[str, bytes]], None]],
    checks: list[str],
) -> None:
    together, alone = DetectorService(TOPOLOGY, checks=checks), DetectorService(TOPOLOGY, checks=checks)
    together.restore({})
    alone.restore({})
    for chunk in (first, second):
        merged = together.handle_many(chunk)
        single = [alone.handle(value, headers, view) for value, headers, view in chunk]
        assert [outcome.dead is not None for outcome in merged] == [outcome.dead is not None for outcome in single]
        assert sorted(f.id for f in together.detector.findings()) == sorted(f.id for f in alone.detector.findings())
