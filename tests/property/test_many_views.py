"""Linkage over many views: the levels above the kept ones, searched for the values they can still change,
against the brute-force reference (Dou & Coulondre's definition: every connected set of views joined).

Random histories of up to eight views over six attributes: cyclic view graphs, views that hold one
attribute, views left empty, nulls, several identifiers and sensitive attributes. ``kept_tasks`` 0 keeps
only the first two levels, so every level above is searched (``checks/linkage/beyond.py``); a larger
budget keeps more and searches less; the findings and their minimal channels must not depend on it.
With selections the reference does not say which links are proven: there the findings must equal those
of the check keeping every level, and their subjects the naive joins' disclosures.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from streamdetect.checks.linkage import LinkageCheck, LinkageState
from streamdetect.model.predicates import Comparison, Membership, Predicate, evaluate
from streamdetect.model.topology import ViewDefinition
from tests.reference import connected, finding_tuples, linkage_reference, natural_join
from tests.registered import run_linkage
from tests.steps import additions_and_withdrawals
from tests.strategies import roles

ATTRIBUTES = ("A", "B", "C", "D", "E", "F")
VALUES = st.integers(0, 2) | st.none()
#: Kept-level budgets: the first two levels only, a few levels, every level (the check before the search).
BUDGETS = [0, 12, 100_000]


@st.composite
def histories(draw: st.DrawFn, selections: bool = False) -> dict[str, Any]:
    attributes, identifiers, sensitive = draw(roles(ATTRIBUTES))
    count = draw(st.integers(1, 8))
    views: dict[str, tuple[str, ...]] = {}
    if draw(st.booleans()) and len(attributes) >= 3:
        # A cycle through some attributes: a-b, b-c, ..., z-a.
        ring = draw(st.lists(st.sampled_from(attributes), min_size=3, max_size=len(attributes), unique=True))
        for i, attribute in enumerate(ring[: min(len(ring), count)]):
            pair = {attribute, ring[(i + 1) % len(ring)]}
            views[f"v{i}"] = tuple(a for a in attributes if a in pair)
    while len(views) < count:
        chosen = draw(st.lists(st.sampled_from(attributes), min_size=1, max_size=3, unique=True))
        views[f"v{len(views)}"] = tuple(a for a in attributes if a in chosen)
    wheres: dict[str, Predicate | None] = {}
    for name, schema in views.items():
        where: Predicate | None = None
        if selections and draw(st.booleans()):
            attribute = draw(st.sampled_from(schema))
            value = draw(st.integers(0, 2))
            choices: list[Predicate] = [
                Comparison(attribute, "=", value),
                Comparison(attribute, "!=", value),
                Membership(attribute, (value,)),
            ]
            where = draw(st.sampled_from(choices))
        wheres[name] = where
    rows = {}
    for name, schema in views.items():
        drawn = draw(st.lists(st.fixed_dictionaries(dict.fromkeys(schema, VALUES)), max_size=6))
        where = wheres[name]
        rows[name] = [row for row in drawn if where is None or evaluate(where, row) is True]
    return {
        "attributes": attributes,
        "identifiers": identifiers,
        "sensitive": sensitive,
        "views": views,
        "wheres": wheres,
        "rows": rows,
        "k": draw(st.sampled_from([2, 3])),
    }


def _check(history: dict[str, Any], kept_tasks: int, pairs_from: int = 2_000) -> LinkageCheck:
    return LinkageCheck(
        views=tuple(ViewDefinition(name, schema, history["wheres"][name]) for name, schema in history["views"].items()),
        identifiers=history["identifiers"],
        sensitive=history["sensitive"],
        attribute_order=history["attributes"],
        k=history["k"],
        kept_tasks=kept_tasks,
        pairs_from=pairs_from,
    )


def _frames(history: dict[str, Any], rows: dict[str, list[dict[str, Any]]]) -> dict[str, pl.DataFrame]:
    return {
        name: pl.DataFrame(rows.get(name, []), schema=dict.fromkeys(schema, pl.Int64))
        for name, schema in history["views"].items()
    }


def _reference(history: dict[str, Any], rows: dict[str, list[dict[str, Any]]]) -> set[tuple[Any, ...]]:
    return linkage_reference(
        history["views"], rows, list(history["identifiers"]), list(history["sensitive"]), history["k"]
    )


#: A ring of six views with two chords (found by a random search against the reference): A = 0 is
#: disclosed only at level 6, in two channels; A = 1 at level 3. With two levels kept, the search walks
#: levels 3 to 6 for A = 0.
_RING: dict[str, Any] = {
    "attributes": ATTRIBUTES,
    "identifiers": ("A",),
    "sensitive": ("D",),
    "views": {
        "v0": ("A", "B"),
        "v1": ("B", "C"),
        "v2": ("C", "D"),
        "v3": ("D", "E"),
        "v4": ("E", "F"),
        "v5": ("A", "F"),
        "v6": ("B", "C"),
        "v7": ("B", "E"),
    },
    "wheres": dict.fromkeys([f"v{i}" for i in range(8)]),
    "rows": {
        "v0": [{"A": 0, "B": 1}, {"A": 1, "B": 0}],
        "v1": [{"B": 1, "C": 0}, {"B": 1, "C": 1}, {"B": 0, "C": 0}],
        "v2": [{"C": 1, "D": 0}, {"C": 0, "D": 1}],
        "v3": [{"D": 0, "E": 0}, {"D": 0, "E": 1}, {"D": 1, "E": 0}],
        "v4": [{"E": 1, "F": 1}, {"E": 0, "F": 0}],
        "v5": [{"A": 0, "F": 0}, {"A": 1, "F": 0}, {"A": 0, "F": 1}],
        "v6": [{"B": 0, "C": 1}, {"B": 0, "C": 0}],
        "v7": [{"B": 1, "E": 0}, {"B": 0, "E": 1}, {"B": 0, "E": 0}],
    },
    "k": 2,
}


@pytest.mark.parametrize(("kept_tasks", "pairs_from"), [(0, 0), *((budget, 2_000) for budget in BUDGETS)])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
@example(history=_RING)
def test_searched_levels_equal_brute_force(kept_tasks: int, pairs_from: int, history: dict[str, Any]) -> None:
    """``pairs_from`` 0: every search first finds the pairs of views the channels must meet."""
    check = _check(history, kept_tasks, pairs_from)
    assert finding_tuples(run_linkage(check, _frames(history, history["rows"]))) == _reference(history, history["rows"])


def test_the_ring_is_searched_to_its_top() -> None:
    """The example above, with two levels kept: A = 0 found at level 6 in both its channels."""
    check = _check(_RING, 0, pairs_from=0)
    assert not check.complete
    findings = run_linkage(check, _frames(_RING, _RING["rows"]))
    assert sorted((f.identifier_value, f.level, len(f.channels)) for f in findings) == [(0, 6, 2), (1, 3, 1)]
    assert finding_tuples(findings) == _reference(_RING, _RING["rows"])


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(selections=True), st.sampled_from([0, 2_000]))
def test_searched_levels_with_selections_equal_every_level_kept(history: dict[str, Any], pairs_from: int) -> None:
    """With selections a lower channel may be unproven and a higher one the certain one: the search goes on
    until a proven channel; the findings (certain or not) equal those of the check keeping every level."""
    frames = _frames(history, history["rows"])
    searched = run_linkage(_check(history, 0, pairs_from), frames)
    kept = run_linkage(_check(history, 100_000), frames)
    assert [(f.id, f.certain, f.channels) for f in searched] == [(f.id, f.certain, f.channels) for f in kept]
    naive = {found[:3] for found in _reference(history, history["rows"])}
    assert {(f.identifier_attribute, f.identifier_value, f.sensitive_attribute) for f in searched} == naive


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.randoms(use_true_random=False), st.sampled_from([0, 2_000]))
def test_searched_levels_follow_additions_and_withdrawals(history: dict[str, Any], rng: Any, pairs_from: int) -> None:
    """Rows added and withdrawn at random, views emptied and filled again: after every batch the findings
    are the reference's over the rows present, the raised/cleared stream replays to them, and a state
    that went through bytes agrees."""
    check = _check(history, 0, pairs_from)
    live: dict[str, Any] = {}
    state = check.initialize()
    for added, withdrawn, present in additions_and_withdrawals(history["rows"], rng, republish=0):
        delta = check.update(
            state,
            {name: frame for name, frame in _frames(history, added).items() if name in added},
            retracted={name: frame for name, frame in _frames(history, withdrawn).items() if name in withdrawn},
        )
        for finding in delta.cleared:
            live.pop(finding.id, None)
        for finding in delta.raised:
            live[finding.id] = finding
        findings = check.result(state)
        assert finding_tuples(findings) == _reference(history, present)
        assert sorted(live) == sorted(f.id for f in findings)
        if rng.random() < 0.2:
            state = LinkageState.from_bytes(state.to_bytes())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.sampled_from([0, 2_000]))
def test_impact_of_withholding_a_view_is_the_closure_of_the_others(history: dict[str, Any], pairs_from: int) -> None:
    """``result(without=...)`` (``check --impact``) with the search: the findings of the other views alone."""
    check = _check(history, 0, pairs_from)
    state = check.initialize()
    check.update(state, _frames(history, history["rows"]))
    withheld = sorted(history["views"])[0]
    others = {name: schema for name, schema in history["views"].items() if name != withheld}
    alone = {**history, "views": others, "rows": {name: history["rows"][name] for name in others}}
    expected = _reference(alone, alone["rows"])
    assert finding_tuples(check.result(state, without=frozenset([withheld]))) == expected
    # From the open findings, searching again only the values every channel of whose level held the view.
    assert finding_tuples(check.result_withheld(state, frozenset([withheld]))) == expected


def _linked(history: dict[str, Any], members: tuple[str, ...], identifier: str, sensitive: str) -> dict[Any, set[Any]]:
    """Brute force: per identifier value, the sensitive values the join of ``members`` links it to."""
    joined = natural_join([history["rows"][name] for name in members])
    linked: dict[Any, set[Any]] = {}
    for row in joined:
        if row.get(identifier) is not None and row.get(sensitive) is not None:
            linked.setdefault(row[identifier], set()).add(row[sensitive])
    return linked


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.sampled_from([0, 2_000]))
@example(history=_RING, pairs_from=2_000)
def test_a_stopped_search_reports_a_channel_with_no_view_to_spare(history: dict[str, Any], pairs_from: int) -> None:
    """With no joins to spare the search stops at once: every disclosed value is still reported (the
    subjects of the reference), at a level no lower than its minimal one, and a value the search stopped
    for in a channel that discloses it and with no view to spare (none can be taken out and leave a
    connected channel holding E and S that discloses it)."""
    check = dataclasses.replace(_check(history, 0, pairs_from), search_budget=0)
    findings = run_linkage(check, _frames(history, history["rows"]))
    expected = {found[:3]: found[3] for found in _reference(history, history["rows"])}
    assert {(f.identifier_attribute, f.identifier_value, f.sensitive_attribute) for f in findings} == set(expected)
    views = history["views"]
    for finding in findings:
        key = (finding.identifier_attribute, finding.identifier_value, finding.sensitive_attribute)
        assert finding.level >= expected[key]
        if finding.searched_below is None:
            assert finding.level == expected[key]
            continue
        assert finding.searched_below <= finding.level
        channel = finding.views
        linked = _linked(history, channel, finding.identifier_attribute, finding.sensitive_attribute)
        assert 0 < len(linked.get(finding.identifier_value, ())) < history["k"]
        for view in channel:
            rest = tuple(name for name in channel if name != view)
            schema = {a for name in rest for a in views[name]}
            if not rest or not connected(views, rest):
                continue
            if finding.identifier_attribute not in schema or finding.sensitive_attribute not in schema:
                continue
            smaller = _linked(history, rest, finding.identifier_attribute, finding.sensitive_attribute)
            assert not 0 < len(smaller.get(finding.identifier_value, ())) < history["k"]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(selections=True))
def test_a_stopped_search_with_selections_names_each_channel_once(history: dict[str, Any]) -> None:
    """Unproven disclosures below where the search stops, then the descent: every subject of the naive joins
    is reported, each channel once, and a finding the search stopped for is no lower than the kept check's."""
    frames = _frames(history, history["rows"])
    stopped = run_linkage(dataclasses.replace(_check(history, 0), search_budget=0), frames)
    kept = {f.subject: f for f in run_linkage(_check(history, 100_000), frames)}
    assert {f.subject for f in stopped} == set(kept)
    for finding in stopped:
        assert len(set(finding.channels)) == len(finding.channels)
        if finding.searched_below is None:
            assert finding.id == kept[finding.subject].id
