"""k-anonymity names the views that force a cover: rerun on just them, the check finds the
cover; rerun without any one of them, it does not. The reference is the definition itself, by instance
enumeration on the subsets (tests/reference.py), so the test does not trust the engine's own reruns. And
the search a stream resumes from its last answer ends where a search from nothing ends."""

from __future__ import annotations

from itertools import combinations
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from streamdetect.checks.k_anonymity.forcing_views import MAX_RUNS, ForcingSearch
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


VIEWS = ("v0", "v1", "v2", "v3", "v4")


@st.composite
def searches(draw: st.DrawFn) -> dict[str, Any]:
    """Keys with hints and what each subset of the views finds, then the same after some views changed:
    the subsets holding none of the changed views answer as before (a subset's answer depends on its views'
    rows alone), the others anew; some keys gone, some new, some with another hint."""
    keys = range(draw(st.integers(0, 12)))
    subsets = [frozenset(chosen) for size in range(1, len(VIEWS) + 1) for chosen in combinations(VIEWS, size)]
    hint = st.sets(st.sampled_from(VIEWS), min_size=1).map(frozenset)

    def answers(keys: range) -> dict[frozenset[str], frozenset[int]]:
        return {subset: frozenset(draw(st.sets(st.sampled_from(keys)))) if keys else frozenset() for subset in subsets}

    before = answers(keys)
    changed = frozenset(draw(st.sets(st.sampled_from(VIEWS), max_size=2)))
    later = range(draw(st.integers(0, 12)))
    redrawn = answers(later)
    after = {subset: redrawn[subset] if subset & changed else before[subset] for subset in subsets}
    hints = {key: draw(hint) for key in keys}
    hints_after = {key: hints[key] if key in hints and draw(st.booleans()) else draw(hint) for key in later}
    # What the caller says may have moved: every key new, gone or with another hint, and some that did not.
    moved = {key for key in set(hints) | set(hints_after) if hints.get(key) != hints_after.get(key)}
    moved |= draw(st.sets(st.sampled_from(range(12))))
    return {
        "hints": (hints, hints_after),
        "answers": (before, after),
        "changed": changed,
        "moved": moved,
        "max_runs": draw(st.sampled_from([3, MAX_RUNS])),
        "releases": {
            key: (frozenset(draw(st.sets(st.sampled_from(VIEWS), min_size=1))), frozenset(VIEWS)) for key in range(12)
        },
    }


@settings(max_examples=200, deadline=None)
@given(searches())
def test_a_search_from_the_last_one_ends_where_a_fresh_search_ends(case: dict[str, Any]) -> None:
    """The stream's search asks again only the keys new, with a new hint, or with a candidate up to their set
    holding a changed view: it gives every key the set a search from nothing gives (whatever the subsets
    answer: the search does not rely on the method's monotonicity for this)."""
    before, after = case["answers"]
    hints, hints_after = case["hints"]

    def search(answers: dict[frozenset[str], frozenset[int]]) -> ForcingSearch[int]:
        def finds(subset: frozenset[str], wanted: Any) -> frozenset[int]:
            return answers[subset]

        return ForcingSearch(VIEWS, finds, case["releases"].__getitem__, max_runs=case["max_runs"])

    last = search(before).run(hints)
    kept = {place: set(keys) for place, keys in last.members.items()}
    assert last.views == search(before).run(hints).views
    resumed = search(after).run(hints_after, last, case["changed"])
    fresh = search(after).run(hints_after)
    assert resumed.views == fresh.views
    assert resumed.left == set(hints) - set(hints_after)
    # Told which keys may have moved, it need not compare the hints, and ends in the same place.
    told = search(after).run(hints_after, last, case["changed"], case["moved"])
    assert told.views == fresh.views
    assert told.left == resumed.left
    assert last.members == kept  # the last answer stays as it was (a stream may read it again)
    event("some key kept its set" if len(resumed.asked) < len(hints_after) else "every key asked again")
