"""k-anonymity names the views that force a cover: rerun on just them, the check finds the
cover; rerun without any one of them, it does not. The reference is the definition itself, by instance
enumeration on the subsets (tests/reference.py), so the test does not trust the engine's own reruns."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings

from streamdetect.engine import run_checks
from streamdetect.model.topology import CheckConfig, TableSchema, Topology, ViewDefinition
from tests.property.test_association_covers_reference import _frames, projections
from tests.reference import association_cover_reference


def _reference(case: dict[str, Any], subset: frozenset[str]) -> set[tuple[str, Any, str, frozenset[Any]]]:
    views = {name: schema for name, schema in case["views"].items() if name in subset}
    attributes = tuple(a for a in case["attributes"] if any(a in schema for schema in views.values()))
    rows = {name: case["rows"][name] for name in views}
    if not set(case["identifiers"]) | set(case["sensitive"]) <= set(attributes):
        # The identifier's (or the sensitive attribute's) values appear in no view of the subset: they
        # range over an open domain, and nothing ties one to the other.
        return set()
    return association_cover_reference(attributes, views, rows, case["identifiers"], case["sensitive"], case["k"])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(projections())
def test_views_of_a_cover_are_a_minimal_forcing_set(case: dict[str, Any]) -> None:
    topology = Topology(
        name="t",
        table=TableSchema("t", case["attributes"], tuple(case["identifiers"]), tuple(case["sensitive"])),
        views=tuple(ViewDefinition(name, schema) for name, schema in case["views"].items()),
        checks=(CheckConfig("k-anonymity", case["k"]),),
    )
    report = run_checks(topology, _frames(case))
    for finding in report.findings:
        key = (finding.identifier_attribute, finding.identifier_value, finding.sensitive_attribute)
        cover = (*key, frozenset(finding.sensitive_values))
        views = frozenset(finding.views)
        assert cover in _reference(case, views), (finding, views)
        for view in views:
            assert cover not in _reference(case, views - {view}), (finding, view)
