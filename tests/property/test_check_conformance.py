"""Every registered check behaves the same fed in pieces (issue 7's conformance, arrivals only so far).

On every shipped topology (the papers' figures: linkage, every k-anonymity method, SIND, RSIND), the
rows are cut into random batches fed in a random order through the Detector, its state round-tripped
through its codec between batches, and split across two partitions that are merged: after every batch
the raised/cleared deltas replayed from the start equal the detector's findings, and so do those of a
replica fed only the keyed pieces the detector writes; in the end they equal one batch with every row.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamdetect.checks.protocol import Batch
from streamdetect.detector import Detector
from streamdetect.io.sources import load_data
from streamdetect.io.topology_file import load_topology

TOPOLOGIES = sorted((Path(__file__).resolve().parents[2] / "topologies").glob("*.yaml"))


def _pieces(views: dict[str, pl.DataFrame], table: pl.DataFrame | None, rng: random.Random) -> list[Batch]:
    pieces: list[Batch] = []
    for name, frame in views.items():
        cuts = sorted(rng.sample(range(frame.height + 1), k=min(2, frame.height + 1)))
        bounds = [0, *cuts, frame.height]
        pieces.extend(Batch(views={name: frame.slice(a, b - a)}) for a, b in itertools.pairwise(bounds) if b > a)
    if table is not None:
        middle = rng.randrange(table.height + 1)
        pieces.extend(Batch(table=part) for part in (table.slice(0, middle), table.slice(middle)) if part.height)
    rng.shuffle(pieces)
    return pieces


@pytest.mark.parametrize("path", TOPOLOGIES, ids=[path.stem for path in TOPOLOGIES])
@settings(
    max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(rng=st.randoms(use_true_random=False))
def test_pieces_codec_and_merge_agree_with_one_batch(path: Path, rng: random.Random) -> None:
    topology = load_topology(path)
    views, table = load_data(topology, with_table=topology.table.source is not None)
    once = Detector(topology)
    once.update(Batch(views=views, table=table))
    expected = sorted(f.id for f in once.findings())
    detector = Detector(topology)
    replica = Detector(topology)  # fed only the keyed pieces the detector writes
    live: dict[str, object] = {}
    for batch in _pieces(views, table, rng):
        delta = detector.update(batch)
        for finding in delta.cleared:
            live.pop(finding.id, None)
        for finding in delta.raised:
            live[finding.id] = finding
        assert sorted(live) == sorted(f.id for f in detector.findings())
        replica.apply_changes(detector.changes())
        assert sorted(f.id for f in replica.findings()) == sorted(live)
        restored = Detector(topology)
        restored.restore(detector.snapshot())
        detector = restored
    assert sorted(live) == expected
    # Two partitions, each with part of the rows, merged check by check.
    batches = _pieces(views, table, rng)
    left, right = Detector(topology), Detector(topology)
    for batch in batches[: len(batches) // 2]:
        left.update(batch)
    for batch in batches[len(batches) // 2 :]:
        right.update(batch)
    for name, check in left.checks.items():
        check.merge(left.states[name], right.states[name])
    assert sorted(f.id for f in left.findings()) == expected
