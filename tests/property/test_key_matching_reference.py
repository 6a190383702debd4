"""ID as key, two views with the same selection (Yao et al. 6.3.2): the values each identifier can
take by complete matchings equal those of every instance that yields the views and keeps the key."""

from __future__ import annotations

from itertools import combinations, product
from typing import Any

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamdetect.checks.k_anonymity.key_matching import KeyMatchingCoverCheck, matching_subcase
from streamdetect.model.predicates import And, Comparison, Or, Predicate, evaluate
from streamdetect.model.topology import FunctionalDependency, ViewDefinition
from tests.registered import k_anonymity_covers

ATTRIBUTES = ("A", "B", "C", "D")


def views(selection: Predicate) -> tuple[ViewDefinition, ViewDefinition]:
    return ViewDefinition("v1", ("A", "B"), selection), ViewDefinition("v2", ("B", "D"), selection)


@st.composite
def selections(draw: st.DrawFn) -> Predicate:
    """C = 1, or C = 1 and some (A, D) pair excluded: links then depend on both PFs."""
    selected = Comparison("C", "=", 1)
    if draw(st.booleans()):
        return selected
    excluded = Or((Comparison("A", "!=", draw(st.integers(0, 3))), Comparison("D", "!=", draw(st.integers(0, 2)))))
    return And((selected, excluded))


@st.composite
def tables(draw: st.DrawFn) -> list[dict[str, int]]:
    keys = draw(st.lists(st.integers(0, 3), min_size=0, max_size=4, unique=True))
    return [
        {"A": a, "B": draw(st.integers(0, 1)), "C": draw(st.integers(0, 1)), "D": draw(st.integers(0, 2))} for a in keys
    ]


def _released(view: ViewDefinition, rows: list[dict[str, int]]) -> set[tuple[int, ...]]:
    assert view.where is not None
    return {tuple(r[a] for a in view.attributes) for r in rows if evaluate(view.where, r)}


def reference(table: list[dict[str, int]], k: int, selection: Predicate) -> dict[int, set[int]]:
    """Identifier values in v1 with fewer than k possible D values over every valid instance."""
    v1, v2 = views(selection)
    r1, r2 = _released(v1, table), _released(v2, table)
    candidates = [
        t
        for values in product(sorted({a for a, _ in r1}), [0, 1], [0, 1], sorted({d for _, d in r2}))
        if evaluate(selection, t := dict(zip(ATTRIBUTES, values, strict=True)))
        and (values[0], values[1]) in r1
        and (values[1], values[3]) in r2
    ]
    possible: dict[int, set[int]] = {a: set() for a, _ in r1}
    for size in range(1, len(candidates) + 1):
        for chosen in combinations(candidates, size):
            keys = [t["A"] for t in chosen]
            if len(keys) != len(set(keys)):
                continue  # A is the key
            if _released(v1, list(chosen)) == r1 and _released(v2, list(chosen)) == r2:
                for t in chosen:
                    possible[t["A"]].add(t["D"])
    return {a: values for a, values in possible.items() if len(values) < k}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables(), st.sampled_from([2, 3]), selections())
def test_matchings_equal_the_definition(table: list[dict[str, int]], k: int, selection: Predicate) -> None:
    v1, v2 = views(selection)
    key = [FunctionalDependency(("A",), ("B", "C", "D"))]
    assert matching_subcase([v1, v2], key, ATTRIBUTES, "A", "D") == (v1, v2)
    frames = {
        view.name: pl.DataFrame(
            [dict(zip(view.attributes, row, strict=True)) for row in _released(view, table)],
            schema=dict.fromkeys(view.attributes, pl.Int64),
        )
        for view in (v1, v2)
    }
    check = KeyMatchingCoverCheck(v1, v2, "A", "D", k)
    found: dict[Any, set[Any]] = {f.identifier_value: set(f.sensitive_values) for f in check.run(frames)}
    expected = reference(table, k, selection)
    assert found == expected
    # The registered check, as ``check`` feeds it and as a stream does (a view no row of the table is
    # selected into has no rows: published empty, or not yet, alike).
    for present_only in (False, True):
        covers = k_anonymity_covers(
            ATTRIBUTES, "A", "D", (v1, v2), frames, k, dependencies=key, present_only=present_only
        )
        assert covers == {(a, frozenset(values)) for a, values in expected.items()}


def test_a_link_outside_every_complete_matching_is_dropped() -> None:
    # a1 links to d0 and d1, a0 only to d1 (the selection excludes (a0, d0)); v2 shows d0, which only
    # a1 can produce, so a1 has d0: the link (a1, d1) is in no complete matching.
    selection = And((Comparison("C", "=", 1), Or((Comparison("A", "!=", 0), Comparison("D", "!=", 0)))))
    table = [{"A": 0, "B": 0, "C": 1, "D": 1}, {"A": 1, "B": 0, "C": 1, "D": 0}]
    v1, v2 = views(selection)
    frames = {
        view.name: pl.DataFrame(
            [dict(zip(view.attributes, row, strict=True)) for row in _released(view, table)],
            schema=dict.fromkeys(view.attributes, pl.Int64),
        )
        for view in (v1, v2)
    }
    found = {
        f.identifier_value: set(f.sensitive_values) for f in KeyMatchingCoverCheck(v1, v2, "A", "D", 2).run(frames)
    }
    assert found == reference(table, 2, selection) == {0: {1}, 1: {0}}
