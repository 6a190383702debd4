"""Certain or possible: a linkage finding marked certain holds in every table instance.

Random small tables with an identifier key, views with random (often different) selections computed
from them; the reference enumerates every instance that yields the views (tests/reference.py). Every
finding marked certain must list the identifier's value in every instance; on projection-only views
every finding is certain; and no disclosure of the naive joins is missing, certain or not.
"""

from __future__ import annotations

from typing import Any

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamdetect.checks.linkage import LinkageCheck
from streamdetect.model.predicates import Comparison, Membership, Not, Predicate, evaluate
from streamdetect.model.topology import ViewDefinition
from tests.reference import linkage_reference, possible_identifier_values
from tests.registered import run_linkage

ATTRIBUTES = ("E", "Q", "R", "S")


SCHEMAS = [("E", "Q"), ("Q", "S"), ("E", "R"), ("R", "S"), ("Q", "R", "S"), ("E", "Q", "R"), ("Q", "R"), ("E", "S")]


@st.composite
def selections(draw: st.DrawFn) -> Predicate | None:
    kind = draw(st.sampled_from(["none", "equal", "unequal", "in", "not"]))
    if kind == "none":
        return None
    attribute = draw(st.sampled_from(ATTRIBUTES))
    value = draw(st.integers(0, 2))
    if kind == "equal":
        return Comparison(attribute, "=", value)
    if kind == "unequal":
        return Comparison(attribute, "!=", value)
    if kind == "in":
        return Membership(attribute, tuple(sorted({value, draw(st.integers(0, 2))})))
    return Not(Comparison(attribute, "<", value))


@st.composite
def publications(draw: st.DrawFn, projection_only: bool = False) -> dict[str, Any]:
    identifiers = draw(st.lists(st.integers(0, 5), min_size=2, max_size=3, unique=True))
    table = [
        {"E": e, "Q": draw(st.integers(0, 1)), "R": draw(st.integers(0, 1)), "S": draw(st.integers(0, 2))}
        for e in identifiers
    ]
    # Mostly the shapes that link through a join: a view with the identifier, one with the sensitive value.
    schemas = draw(
        st.lists(st.sampled_from(SCHEMAS[:-1]) | st.sampled_from(SCHEMAS), min_size=2, max_size=3, unique=True)
    )
    views: dict[str, tuple[tuple[str, ...], Predicate | None]] = {
        f"v{i}": (schema, None if projection_only else draw(selections())) for i, schema in enumerate(schemas)
    }
    rows = {
        name: {tuple(t[a] for a in schema) for t in table if where is None or evaluate(where, t) is True}
        for name, (schema, where) in views.items()
    }
    return {"table": table, "views": views, "rows": rows, "k": draw(st.sampled_from([2, 3]))}


def _findings(publication: dict[str, Any]) -> list[Any]:
    views = publication["views"]
    check = LinkageCheck(
        views=tuple(ViewDefinition(name, schema, where) for name, (schema, where) in views.items()),
        identifiers=("E",),
        sensitive=("S",),
        attribute_order=ATTRIBUTES,
        k=publication["k"],
    )
    frames = {
        name: pl.DataFrame(sorted(publication["rows"][name]), schema=dict.fromkeys(schema, pl.Int64), orient="row")
        for name, (schema, _) in views.items()
    }
    return run_linkage(check, frames)


def _naive_keys(publication: dict[str, Any]) -> set[tuple[Any, ...]]:
    views = {name: schema for name, (schema, _) in publication["views"].items()}
    rows = {
        name: [dict(zip(schema, r, strict=True)) for r in publication["rows"][name]] for name, schema in views.items()
    }
    return {found[:3] for found in linkage_reference(views, rows, ["E"], ["S"], publication["k"])}


def _possible(publication: dict[str, Any]) -> dict[Any, set[Any]]:
    predicates = {
        name: (schema, (lambda row, w=where: w is None or evaluate(w, row) is True))
        for name, (schema, where) in publication["views"].items()
    }
    return possible_identifier_values(ATTRIBUTES, "E", "S", predicates, publication["rows"])


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(publications())
def test_certain_findings_hold_in_every_instance(publication: dict[str, Any]) -> None:
    findings = _findings(publication)
    assert {(f.identifier_attribute, f.identifier_value, f.sensitive_attribute) for f in findings} == _naive_keys(
        publication
    )
    possible = _possible(publication)
    for finding in findings:
        assert len(finding.channel_values) == len(finding.channels)
        assert finding.sensitive_values == finding.channel_values[0]
        if finding.certain:
            assert possible[finding.identifier_value] <= set(finding.sensitive_values), finding
        else:
            assert not finding.total


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(publications(projection_only=True))
def test_projection_only_findings_are_all_certain(publication: dict[str, Any]) -> None:
    findings = _findings(publication)
    assert all(f.certain for f in findings)
    possible = _possible(publication)
    for finding in findings:
        assert possible[finding.identifier_value] <= set(finding.sensitive_values)
