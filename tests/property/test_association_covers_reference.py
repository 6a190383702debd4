"""Exact k-anonymity by views against every table instance (Yao, Wang & Jajodia 2005, definitions).

Random small tables, projection-only views of them, no FDs: the association covers streamdetect
reports equal the minimal covers smaller than k derived by enumerating every instance that yields the
views. Random batch orders end in the same findings, and every linkage disclosure at k = 2 in the
channel of all views is also a k-anonymity violation.
"""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

import polars as pl
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from streamdetect.checks.k_anonymity import held_values
from streamdetect.checks.k_anonymity.association_covers import AssociationCoverCheck, AssociationCoverState
from streamdetect.checks.linkage import LinkageCheck
from streamdetect.model.topology import ViewDefinition
from tests.reference import association_cover_reference, instances
from tests.registered import k_anonymity_covers

ATTRIBUTES = ("A", "B", "C", "D")


@st.composite
def projections(draw: st.DrawFn) -> dict[str, Any]:
    attributes = ATTRIBUTES[: draw(st.integers(3, 4))]
    table = draw(st.lists(st.fixed_dictionaries({a: st.integers(0, 1) for a in attributes}), min_size=0, max_size=4))
    count = draw(st.integers(1, 3))
    views: dict[str, tuple[str, ...]] = {}
    for i in range(count):
        chosen = draw(st.lists(st.sampled_from(attributes), min_size=1, max_size=3, unique=True))
        views[f"v{i}"] = tuple(a for a in attributes if a in chosen)
    covered = {a for schema in views.values() for a in schema}
    assume(len(covered) == len(attributes))  # every attribute released somewhere (finite domains)
    rows = {
        name: [dict(items) for items in {tuple((a, row[a]) for a in schema) for row in table}]
        for name, schema in views.items()
    }
    identifier = draw(st.sampled_from(attributes))
    sensitive = draw(st.sampled_from([a for a in attributes if a != identifier]))
    return {
        "attributes": attributes,
        "views": views,
        "rows": rows,
        "identifiers": [identifier],
        "sensitive": [sensitive],
        "k": draw(st.sampled_from([2, 3])),
    }


def _check(case: dict[str, Any]) -> AssociationCoverCheck:
    views = tuple(ViewDefinition(name, schema) for name, schema in case["views"].items())
    return AssociationCoverCheck(views, tuple(case["identifiers"]), tuple(case["sensitive"]), case["k"])


def _frames(case: dict[str, Any]) -> dict[str, pl.DataFrame]:
    return {
        name: pl.DataFrame(case["rows"][name], schema=dict.fromkeys(schema, pl.Int64))
        for name, schema in case["views"].items()
    }


def _covers(findings: Any) -> set[tuple[str, Any, str, frozenset[Any]]]:
    return {
        (f.identifier_attribute, f.identifier_value, f.sensitive_attribute, frozenset(f.sensitive_values))
        for f in findings
    }


@pytest.mark.parametrize("matrices", [held_values.MATRIX_CAP, 2], ids=["values-held", "values-read-from-the-sets"])
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(case=projections())
def test_covers_equal_the_definition(case: dict[str, Any], matrices: int) -> None:
    """Whether the sensitive values per projection fact are held in a matrix (k up to
    :data:`~streamdetect.checks.k_anonymity.held_values.MATRIX_CAP`) or read from the sets (above it: here
    every k above 2)."""
    check = _check(case)
    with patch.object(held_values, "MATRIX_CAP", matrices):
        found = check.update(check.initialize(), _frames(case)).raised
    expected = association_cover_reference(
        case["attributes"], case["views"], case["rows"], case["identifiers"], case["sensitive"], case["k"]
    )
    assert _covers(found) == expected


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(projections(), st.data())
def test_views_with_no_rows_yet_are_read_as_not_released(case: dict[str, Any], data: st.DataObject) -> None:
    """The registered check on a stream where only some views have published (the others have no rows yet,
    or had every row withdrawn): the covers of the views that have rows, from the definition. A
    projection with no rows beside views with rows would mean an empty table, which no instance yields.
    With the join-based method finding nothing until every view has rows, it fails at once."""
    arrived = data.draw(st.lists(st.sampled_from(sorted(case["views"])), unique=True), label="arrived")
    views = {name: schema for name, schema in case["views"].items() if name in arrived}
    rows = {name: case["rows"][name] for name in views}
    released = {a for schema in views.values() for a in schema}
    e, s = case["identifiers"][0], case["sensitive"][0]
    # An attribute no released view shows has an unbounded domain: no cover names a value of it.
    expected = set()
    if e in released and s in released:
        expected = association_cover_reference(case["attributes"], views, rows, [e], [s], case["k"])
    definitions = tuple(ViewDefinition(name, attributes) for name, attributes in case["views"].items())
    frames = {name: frame if name in arrived else frame.clear() for name, frame in _frames(case).items()}
    parts = (case["attributes"], e, s, definitions, frames, case["k"])
    for present_only in (True, False):  # False: the others published with no rows, which changes nothing
        found = k_anonymity_covers(*parts, present_only=present_only)
        assert {(e, value, s, values) for value, values in found} == expected


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(projections(), st.randoms(use_true_random=False))
def test_batches_orders_and_merges_agree(case: dict[str, Any], rng: Any) -> None:
    check = _check(case)
    frames = _frames(case)
    once = sorted(f.id for f in check.update(check.initialize(), frames).raised)
    pieces = [(name, frame.slice(i, 1)) for name, frame in frames.items() for i in range(frame.height)]
    rng.shuffle(pieces)
    state = check.initialize()
    for name, piece in pieces:
        check.update(state, {name: piece})
    assert sorted(f.id for f in check.result(state)) == once
    left, right = check.initialize(), check.initialize()
    for i, (name, piece) in enumerate(pieces):
        check.update(left if i % 2 else right, {name: piece})
    restored = AssociationCoverState.from_bytes(left.to_bytes())
    check.merge(restored, right)
    assert sorted(f.id for f in check.result(restored)) == once


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(projections())
def test_every_linkage_disclosure_of_the_whole_channel_is_a_cover(case: dict[str, Any]) -> None:
    frames = _frames(case)
    views = tuple(ViewDefinition(name, schema) for name, schema in case["views"].items())
    linkage = LinkageCheck(views, tuple(case["identifiers"]), tuple(case["sensitive"]), case["attributes"], k=2)
    whole = tuple(sorted(case["views"]))
    assume(whole in {channel.views for level in linkage.levels for channel in level})  # connected views
    state = linkage.initialize()
    linkage.update(state, frames)
    linked = state.linked.get((whole, case["identifiers"][0], case["sensitive"][0]))
    assume(linked is not None)
    e, s = case["identifiers"][0], case["sensitive"][0]
    decoded = linked.with_columns(
        pl.col(e).map_elements(lambda c: state.seen.dictionaries[e][c], return_dtype=pl.Int64),
        pl.col(s).map_elements(lambda c: state.seen.dictionaries[s][c], return_dtype=pl.Int64),
    )
    disclosed = decoded.group_by(e).agg(pl.col(s)).filter(pl.col(s).list.len() == 1)
    covers = _covers(_check({**case, "k": 2}).update(AssociationCoverState(), frames).raised)
    for value, (only,) in disclosed.iter_rows():
        assert (e, value, s, frozenset([only])) in covers


def test_instances_reference_sanity() -> None:
    # Figure 1 of Yao et al.: every instance yields v1 and v2; the real table is one of them.
    views = {"v1": ("Name", "Job"), "v2": ("Job", "Problem")}
    rows = {
        "v1": [{"Name": "G", "Job": "M"}, {"Name": "J", "Job": "M"}, {"Name": "B", "Job": "L"}],
        "v2": [{"Job": "M", "Problem": "C"}, {"Job": "M", "Problem": "O"}, {"Job": "L", "Problem": "H"}],
    }
    found = instances(("Name", "Job", "Problem"), views, rows)
    real = [
        {"Name": "G", "Job": "M", "Problem": "C"},
        {"Name": "J", "Job": "M", "Problem": "O"},
        {"Name": "B", "Job": "L", "Problem": "H"},
    ]
    assert any(sorted(map(str, i)) == sorted(map(str, real)) for i in found)
    assert all({"Name": "B", "Job": "L", "Problem": "H"} in i for i in found)


@st.composite
def several_pairs(draw: st.DrawFn) -> dict[str, Any]:
    """Views over five attributes, two identifiers and two sensitive ones, values sometimes null, rows
    cut into batches."""
    attributes = ("A", "B", "C", "D", "E")
    views: dict[str, tuple[str, ...]] = {}
    for i in range(draw(st.integers(2, 4))):
        chosen = draw(st.lists(st.sampled_from(attributes), min_size=1, max_size=3, unique=True))
        views[f"v{i}"] = tuple(a for a in attributes if a in chosen)
    value = st.integers(0, 2) | st.none()
    rows = {
        name: draw(st.lists(st.fixed_dictionaries(dict.fromkeys(schema, value)), max_size=6))
        for name, schema in views.items()
    }
    return {"views": views, "rows": rows, "k": draw(st.sampled_from([2, 3])), "cut": draw(st.integers(1, 3))}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(several_pairs())
def test_pairs_checked_together_equal_each_pair_alone(case: dict[str, Any]) -> None:
    """The capped sets of a target are shared between the pairs that give the same set (no null telling
    them apart): the covers of all pairs together, fed in batches, are those of each pair checked alone."""
    views = tuple(ViewDefinition(name, schema) for name, schema in case["views"].items())
    frames = {
        name: pl.DataFrame(case["rows"][name], schema=dict.fromkeys(schema, pl.Int64))
        for name, schema in case["views"].items()
    }
    together = AssociationCoverCheck(views, ("A", "B"), ("C", "D"), case["k"])
    state = together.initialize()
    for part in range(case["cut"]):
        together.add(state, {name: frame.gather_every(case["cut"], part) for name, frame in frames.items()})
    alone: set[tuple[str, Any, str, frozenset[Any]]] = set()
    for identifier in ("A", "B"):
        for sensitive in ("C", "D"):
            single = AssociationCoverCheck(views, (identifier,), (sensitive,), case["k"])
            alone |= _covers(single.update(single.initialize(), frames).raised)
    assert _covers(together.result(state)) == alone
