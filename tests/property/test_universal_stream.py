"""The universal-relation stream (relational/universal_stream.py) against ``closure --universal``.

Over a stream of additions in random batches, the tuples each channel emits are, together, exactly the
channel's joined view as ``universal_relation`` computes it over all the rows (sets, each tuple once),
for the channels holding an identifier and a sensitive attribute; under a cap, each channel emits at
most the cap, all of them tuples of its joined view. A stream rebuilt half-way from a Detector's rows and
the written counts goes on emitting the same tuples as the one that never stopped.
"""

from __future__ import annotations

import random
from typing import Any

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamdetect.detector import Detector
from streamdetect.model.batch import Batch
from streamdetect.model.topology import CheckConfig, TableSchema, Topology, ViewDefinition
from streamdetect.relational.universal import CHANNEL_COLUMN, universal_relation
from streamdetect.relational.universal_stream import UniversalStream
from tests.property.test_linkage_reference import publications


def _topology(publication: dict[str, Any]) -> Topology:
    table = TableSchema("T", publication["attributes"], publication["identifiers"], publication["sensitive"])
    views = tuple(ViewDefinition(name, schema) for name, schema in publication["views"].items())
    return Topology("random", table, views, (CheckConfig("linkage", publication["k"]),))


def _batches(publication: dict[str, Any], rng: random.Random) -> list[Batch]:
    pieces = []
    for view, rows in publication["rows"].items():
        schema = dict.fromkeys(publication["views"][view], pl.Int64)
        at = 0
        while at < len(rows):
            size = rng.randint(1, 3)
            pieces.append(Batch({view: pl.DataFrame(rows[at : at + size], schema=schema)}))
            at += size
    rng.shuffle(pieces)
    return pieces


def _tuples(frame: pl.DataFrame) -> dict[str, set[tuple[Any, ...]]]:
    by_channel: dict[str, set[tuple[Any, ...]]] = {}
    for row in frame.iter_rows(named=True):
        channel = row[CHANNEL_COLUMN]
        values = tuple(sorted((k, v) for k, v in row.items() if not k.startswith("_") and v is not None))
        by_channel.setdefault(channel, set()).add(values)
    return by_channel


def _expected(publication: dict[str, Any], stream: UniversalStream) -> dict[str, set[tuple[Any, ...]]]:
    topology = _topology(publication)
    views = {
        name: pl.DataFrame(rows, schema=dict.fromkeys(publication["views"][name], pl.Int64))
        for name, rows in publication["rows"].items()
    }
    whole = universal_relation(topology.views, views, topology.table.attributes, 10**9)
    emitted = {channel.label for channel in stream.channels}
    return {label: rows for label, rows in _tuples(whole).items() if label in emitted}


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(publication=publications(), rng=st.randoms(use_true_random=False))
def test_the_tuples_emitted_are_the_channels_joined_views(publication: dict[str, Any], rng: random.Random) -> None:
    stream = UniversalStream(_topology(publication), cap=10**9)
    state = stream.initialize()
    emitted: dict[str, list[tuple[Any, ...]]] = {}
    for batch in _batches(publication, rng):
        for channel, tuples in stream.update(state, batch):
            assert tuples.columns[: len(stream.order)] == stream.order  # the union schema, in table order
            for label, rows in _tuples(tuples).items():
                assert label == channel.label
                emitted.setdefault(label, []).extend(rows)
    assert {label: set(rows) for label, rows in emitted.items()} == _expected(publication, stream)
    assert all(len(rows) == len(set(rows)) for rows in emitted.values())  # each tuple once


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(publication=publications(), cap=st.integers(1, 4), rng=st.randoms(use_true_random=False))
def test_a_capped_channel_emits_at_most_its_cap_of_its_own_tuples(
    publication: dict[str, Any], cap: int, rng: random.Random
) -> None:
    stream = UniversalStream(_topology(publication), cap=cap)
    state = stream.initialize()
    counts: dict[str, int] = {}
    expected = _expected(publication, stream)
    for batch in _batches(publication, rng):
        for channel, tuples in stream.update(state, batch):
            counts[channel.label] = counts.get(channel.label, 0) + tuples.height
            assert _tuples(tuples)[channel.label] <= expected[channel.label]
    assert all(count <= cap for count in counts.values())
    assert counts == {label: min(cap, len(rows)) for label, rows in expected.items() if rows}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(publication=publications(), cap=st.sampled_from([2, 10**9]), rng=st.randoms(use_true_random=False))
def test_a_stream_rebuilt_from_the_detector_goes_on_as_before(
    publication: dict[str, Any], cap: int, rng: random.Random
) -> None:
    topology = _topology(publication)
    batches = _batches(publication, rng)
    half = len(batches) // 2
    stream = UniversalStream(topology, cap=cap)
    state = stream.initialize()
    detector = Detector(topology)
    for batch in batches[:half]:
        detector.update(batch)
        stream.update(state, batch)
    rebuilt = stream.initialize(detector.present_rows())
    stream.restore_counts(rebuilt, stream.counts(state))
    for batch in batches[half:]:
        went_on = [(c.label, t.sort(t.columns).rows()) for c, t in stream.update(state, batch)]
        again = [(c.label, t.sort(t.columns).rows()) for c, t in stream.update(rebuilt, batch)]
        # The same channels gain as many tuples; under a binding cap, which of the joined tuples fill it
        # depends on the order the rows are kept in (arrival, or the Detector's), so only uncapped the same.
        assert [(label, len(rows)) for label, rows in again] == [(label, len(rows)) for label, rows in went_on]
        if cap > 100:
            assert again == went_on


def test_units_of_one_identifier_emit_the_channels_it_comes_first_in() -> None:
    table = TableSchema("T", ("SSN", "Name", "Job", "Disease"), ("SSN", "Name"), ("Disease",))
    views = (ViewDefinition("v1", ("SSN", "Job", "Disease")), ViewDefinition("v2", ("Name", "Job")))
    topology = Topology("t", table, views, (CheckConfig("linkage", 2),))
    labels = {owner: [c.label for c in UniversalStream(topology, 5, owner).channels] for owner in ("SSN", "Name")}
    assert labels == {"SSN": ["{v1}", "{v1, v2}"], "Name": []}
    assert [c.label for c in UniversalStream(topology, 5).channels] == ["{v1}", "{v1, v2}"]
