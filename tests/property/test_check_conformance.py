"""Every registered check behaves the same fed in pieces (conformance).

On every shipped topology (the papers' figures: linkage, every k-anonymity method, SIND, RSIND), the
rows are cut into random batches fed in a random order through the Detector, with random withdrawals of
rows published earlier (and some withdrawn rows published again), its state round-tripped through its
codec between batches, and split across two partitions that are merged: after every batch the findings
equal those of a fresh Detector given the rows present in one batch, the raised/cleared deltas replayed
from the start equal them too, and so do those of a replica fed only the keyed pieces the detector writes.
"""

from __future__ import annotations

import itertools
import random
import tempfile
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from streamdetect.detector import Detector
from streamdetect.io.sources import load_data
from streamdetect.io.topology_file import load_topology
from streamdetect.model.batch import Batch
from streamdetect.relational.bags import remove_occurrences

TOPOLOGIES = sorted((Path(__file__).resolve().parents[2] / "topologies").glob("*.yaml"))
_EVERY_TOPOLOGY = pytest.mark.parametrize("path", TOPOLOGIES, ids=[path.stem for path in TOPOLOGIES])


def _examples(count: int) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Hypothesis with ``count`` random orders per topology (each runs every check)."""
    suppress = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]

    def wrap(test: Callable[..., None]) -> Callable[..., None]:
        return settings(max_examples=count, deadline=None, suppress_health_check=suppress)(
            given(rng=st.randoms(use_true_random=False))(test)
        )

    return wrap


def _pieces(views: dict[str, pl.DataFrame], table: pl.DataFrame | None, rng: random.Random) -> list[Batch]:
    pieces: list[Batch] = []
    for name, frame in views.items():
        cuts = sorted(rng.sample(range(frame.height + 1), k=min(2, frame.height + 1)))
        bounds = [0, *cuts, frame.height]
        pieces.extend(Batch(views={name: frame.slice(a, b - a)}) for a, b in itertools.pairwise(bounds) if b > a)
    if table is not None:  # cut as the views are; an empty table is one batch with no rows
        cuts = sorted(rng.sample(range(table.height + 1), k=min(2, table.height + 1)))
        bounds = [0, *cuts, table.height]
        parts = [table.slice(a, b - a) for a, b in itertools.pairwise(bounds) if b > a] or [table.clear()]
        pieces.extend(Batch(table=part) for part in parts)
    rng.shuffle(pieces)
    return pieces


def _sample(frame: pl.DataFrame, rng: random.Random) -> pl.DataFrame:
    return frame[sorted(rng.sample(range(frame.height), k=rng.randint(1, min(3, frame.height))))]


def _with_withdrawals(
    batches: list[Batch], rng: random.Random
) -> tuple[list[Batch], list[tuple[dict[str, pl.DataFrame], pl.DataFrame | None]]]:
    """The batches with random withdrawals of rows present, re-publications of withdrawn ones and second
    occurrences of present ones; with the rows present (bags) after each batch."""
    present: dict[str, pl.DataFrame] = {}
    table: pl.DataFrame | None = None
    withdrawn: dict[str, list[pl.DataFrame]] = {}
    out: list[Batch] = []
    states = []
    for batch in batches:
        retracted = {name: _sample(rows, rng) for name, rows in present.items() if rows.height and rng.random() < 0.5}
        for name, rows in present.items():
            if rows.height and rng.random() < 0.15:  # withdraw every row: the view is left empty
                retracted[name] = rows
        retracted_table = _sample(table, rng) if table is not None and table.height and rng.random() < 0.5 else None
        added = dict(batch.views)
        for name, frames in withdrawn.items():
            if frames and rng.random() < 0.3:
                again = frames.pop()
                added[name] = again if name not in added else pl.concat([added[name], again])
        for name, rows in present.items():
            if rows.height and rng.random() < 0.3:  # publish a present row again: views are bags
                again = _sample(rows, rng)
                added[name] = again if name not in added else pl.concat([added[name], again])
        for name, rows in retracted.items():
            present[name] = remove_occurrences(present[name], rows, name)
            withdrawn.setdefault(name, []).append(rows)
        if retracted_table is not None and table is not None:
            table = remove_occurrences(table, retracted_table, "the table")
        for name, rows in added.items():
            present[name] = rows if name not in present else pl.concat([present[name], rows])
        if batch.table is not None:
            table = batch.table if table is None else pl.concat([table, batch.table])
        out.append(Batch(views=added, table=batch.table, retracted=retracted, retracted_table=retracted_table))
        states.append((dict(present), table))
    return out, states


def _fresh(path: Path, views: dict[str, pl.DataFrame], table: pl.DataFrame | None) -> list[str]:
    """The findings of ``check`` on the rows present: every view given, those with no rows as empty frames
    (the Detector under test saw some of them never, some emptied by withdrawals)."""
    return sorted(f.id for f in _fresh_detector(path, views, table).findings())


def _fresh_detector(path: Path, views: dict[str, pl.DataFrame], table: pl.DataFrame | None) -> Detector:
    topology = load_topology(path)
    loaded, _ = load_data(topology, with_table=False)
    detector = Detector(topology)
    detector.update(Batch(views={name: views.get(name, frame.clear()) for name, frame in loaded.items()}, table=table))
    return detector


@_EVERY_TOPOLOGY
@_examples(3)
def test_withdrawals_agree_with_a_fresh_check_of_the_rows_present(path: Path, rng: random.Random) -> None:
    _conform(path, rng)


def _conform(path: Path, rng: random.Random) -> None:
    """Random batches with withdrawals through the Detector, codec and pieces between batches, then two
    partitions merged: each time the findings of a fresh Detector given the rows present."""
    topology = load_topology(path)
    views, table = load_data(topology, with_table=topology.table.source is not None)
    batches, states = _with_withdrawals(_pieces(views, table, rng), rng)
    # What the edges drawn were (shown by pytest --hypothesis-show-statistics).
    if table is not None and table.is_empty():
        event("an empty table")
    if any(frame.is_empty() for frame in views.values()):
        event("a view published with no rows")
    if any(name in present and present[name].is_empty() for present, _ in states for name in views):
        event("a view emptied by withdrawals")
    detector = Detector(topology)
    replica = Detector(topology)
    live: dict[str, object] = {}
    for batch, (present, present_table) in zip(batches, states, strict=True):
        delta = detector.update(batch)
        for finding in delta.cleared:
            live.pop(finding.id, None)
        for finding in delta.raised:
            live[finding.id] = finding
        fresh = _fresh_detector(path, present, present_table)
        expected = sorted(f.id for f in fresh.findings())
        assert sorted(f.id for f in detector.findings()) == expected
        assert sorted(live) == expected
        # Blind to the table exactly while no batch of it has arrived (an empty one counts).
        assert detector.incomplete() == fresh.incomplete()
        replica.apply_changes(detector.changes())
        assert sorted(f.id for f in replica.findings()) == expected
        assert replica.incomplete() == fresh.incomplete()
        restored = Detector(topology)
        restored.restore(detector.snapshot())
        detector = restored
    # Two partitions, each withdrawing only its own rows, merged check by check.
    pieces = _pieces(views, table, rng)
    left_batches, left_states = _with_withdrawals(pieces[::2], rng)
    right_batches, right_states = _with_withdrawals(pieces[1::2], rng)
    left, right = Detector(topology), Detector(topology)
    for batch in left_batches:
        left.update(batch)
    for batch in right_batches:
        right.update(batch)
    for name, check in left.checks.items():
        check.merge(left.states[name], right.states[name])
    (left_views, left_table), (right_views, right_table) = (
        left_states[-1] if left_states else ({}, None),
        right_states[-1] if right_states else ({}, None),
    )
    union = {
        name: pl.concat([f for f in (left_views.get(name), right_views.get(name)) if f is not None])
        for name in {*left_views, *right_views}
    }
    tables = [t for t in (left_table, right_table) if t is not None]
    assert sorted(f.id for f in left.findings()) == _fresh(path, union, pl.concat(tables) if tables else None)


@_EVERY_TOPOLOGY
@_examples(4)
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


_NAMES = ("A", "B", "C", "D", "E")


@st.composite
def _random_topologies(draw: st.DrawFn) -> tuple[str, str]:
    """A small random publication: a private table over 4-5 integer attributes (an identifier naming one
    row, sensitive and quasi-identifying attributes, at times a functional dependency the rows keep) and
    two or three views, projections of it, some with a selection; every registered check configured.

    Half are chains of views from the identifier to one sensitive attribute (with the identifier the key
    and one selection on every view, Yao et al.'s key-path and matching subcases of section 6.3), half
    views over random attributes (the association covers, the cell procedure, the conservative check).
    The edges are drawn: an empty table, one-row tables, selections no row satisfies (views published
    with no rows); the batches add withdrawals that empty a view. The topology's YAML text and the
    table's CSV text."""
    attributes = list(_NAMES[: draw(st.integers(4, 5))])
    identifier, rest = attributes[0], attributes[1:]
    chain = draw(st.booleans())
    sensitive = draw(st.lists(st.sampled_from(rest), min_size=1, max_size=1 if chain else 2, unique=True))
    others = [a for a in rest if a not in sensitive]
    quasi = draw(st.lists(st.sampled_from(others), min_size=1, max_size=2, unique=True))
    dependency = draw(st.sampled_from(["none", "key", "key", "pair"] if chain else ["none", "key", "pair"]))
    fds: list[str] = []
    # An empty table and one-row tables too (every view then empty, or every class of one row).
    rows = [[i, *(draw(st.integers(0, 2)) for _ in rest)] for i in range(draw(st.integers(0, 7)))]
    if dependency == "key":
        fds.append(f"{identifier} -> {', '.join(rest)}")
    elif dependency == "pair" and len(others) >= 2:
        left, right = others[0], others[1]
        fds.append(f"{left} -> {right}")
        image = [draw(st.integers(0, 2)) for _ in range(3)]
        for row in rows:  # the rows keep the dependency: right is a function of left
            row[attributes.index(right)] = image[row[attributes.index(left)]]

    def selection() -> str:
        on = draw(st.sampled_from(rest))
        # Values are 0..2: "> 2" and "= 3" select no row (the view is published empty).
        operator, value = draw(
            st.tuples(st.sampled_from(["<", "<>", "="]), st.integers(0, 2)) | st.sampled_from([(">", 2), ("=", 3)])
        )
        return f'    where: "{on} {operator} {value}"'

    views: list[str] = []
    if chain:
        middle = draw(st.lists(st.sampled_from(others), min_size=1, max_size=2, unique=True))
        path = [identifier, *middle, sensitive[0]]
        shared = selection() if draw(st.booleans()) else None
        for i in range(len(path) - 1):
            views += [f"  - name: v{i}", f"    attributes: [{', '.join(path[i : i + 2])}]"]
            views += [shared] if shared is not None else []
    else:
        for i in range(draw(st.integers(2, 3))):
            chosen = draw(st.lists(st.sampled_from(attributes), min_size=2, max_size=3, unique=True))
            views += [f"  - name: v{i}", f"    attributes: [{', '.join(a for a in attributes if a in chosen)}]"]
            views += [selection()] if draw(st.integers(0, 3)) == 0 else []
    k = draw(st.sampled_from([2, 3]))
    text = "\n".join(
        [
            "name: random",
            "table:",
            "  name: T",
            f"  attributes: {{{', '.join(f'{a}: int' for a in attributes)}}}",
            f"  identifiers: [{identifier}]",
            f"  sensitive: [{', '.join(sensitive)}]",
            f"  quasi_identifiers: [{', '.join(quasi)}]",
            f"  functional_dependencies: [{', '.join(repr(fd) for fd in fds)}]",
            "  source: table.csv",
            "views:",
            *views,
            "checks:",
            f"  linkage: {{k: {k}}}",
            f"  k-anonymity: {{k: {k}}}",
            f"  sind: {{k: {k}}}",
            f"  rsind: {{k: {k}}}",
            f"  table-k-anonymity: {{k: {k}}}",
            "  l-diversity: {l: 2}",
        ]
    )
    table = "\n".join([",".join(attributes), *(",".join(map(str, row)) for row in rows)]) + "\n"
    return text, table


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(publication=_random_topologies(), rng=st.randoms(use_true_random=False))
def test_random_topologies_agree_with_a_fresh_check_of_the_rows_present(
    publication: tuple[str, str], rng: random.Random
) -> None:
    """Every registered check on random small topologies and rows (conformance): the same random
    batches, withdrawals, codec round trips, pieces and merges as on the shipped topologies."""
    text, table = publication
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "random.yaml"
        path.write_text(text)
        (Path(folder) / "table.csv").write_text(table)
        _conform(path, rng)
