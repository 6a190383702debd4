"""A subset of the views answered without its views redundant for a pair (``redundant_views``) finds the
covers it finds with them: the forcing-view search gives the same findings, forcing views included, with
and without the reduction. Views of one table's rows, each published in part (so that a view's join
values are sometimes all within another's and sometimes not), nulls, views with no rows, three to five
views."""

from __future__ import annotations

from itertools import combinations
from typing import Any

import polars as pl
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from streamdetect.checks.k_anonymity import redundant_views
from streamdetect.checks.k_anonymity.association_covers import AssociationCoverState
from streamdetect.checks.k_anonymity.join_search import JoinSearch
from streamdetect.checks.k_anonymity.kept_relations import KeptRelations
from streamdetect.checks.k_anonymity.methods import JoinMethod, choose_method, restricted
from streamdetect.checks.k_anonymity.redundant_views import without_redundant_views
from streamdetect.model.batch import Batch
from streamdetect.model.topology import Topology
from tests.property.test_k_anonymity_stream import ATTRIBUTES, _frames, _topology


@st.composite
def publications(draw: st.DrawFn) -> dict[str, Any]:
    """Views of one table's rows, each published in part (its join values then within another's or not)."""
    views: dict[str, tuple[str, ...]] = {}
    for i in range(draw(st.integers(3, 5))):
        chosen = draw(st.lists(st.sampled_from(ATTRIBUTES), min_size=1, max_size=3, unique=True))
        views[f"v{i}"] = tuple(a for a in ATTRIBUTES if a in chosen)
    value = st.integers(0, 2) | st.none() if draw(st.booleans()) else st.integers(0, 2)
    table = draw(st.lists(st.fixed_dictionaries(dict.fromkeys(ATTRIBUTES, value)), max_size=7))
    rows = {
        name: [{a: row[a] for a in schema} for row in table if draw(st.integers(0, 3))]  # about 3 in 4 published
        for name, schema in views.items()
    }
    return {"views": views, "rows": rows, "k": draw(st.sampled_from([2, 3]))}


def _state(case: dict[str, Any]) -> tuple[Topology, JoinMethod, AssociationCoverState, dict[str, pl.DataFrame]]:
    """The case's topology, its join-based method, the method's state holding every row, and the rows."""
    topology = _topology(case)
    method = choose_method(topology, case["k"])
    assert isinstance(method, JoinMethod)
    state = method.initialize()
    frames = _frames(case, case["rows"])
    method.add(state, Batch(views=frames), None)
    return topology, method, state, frames


def _search(case: dict[str, Any], reduce: bool) -> tuple[list[str], int]:
    """The findings' ids and how many subsets the search answered by fewer views."""
    topology, method, state, _ = _state(case)
    findings = JoinSearch(method.check, topology, method._narrower, reduce=reduce).covers(state)
    return sorted(finding.id for finding in findings), len(state.search.reduced) if state.search else 0


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(publications())
def test_the_search_finds_the_same_with_subsets_answered_by_fewer_views(case: dict[str, Any]) -> None:
    reduced, answered = _search(case, reduce=True)
    event("some subset answered by fewer views" if answered else "no subset answered by fewer views")
    assert reduced == _search(case, reduce=False)[0]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(publications())
def test_a_subset_without_its_redundant_views_finds_the_covers_it_finds(case: dict[str, Any]) -> None:
    """The reduction itself, on every subset and pair: the check run fresh on the subset and on the subset
    without its redundant views finds the same covers of the pair."""
    topology, _, state, frames = _state(case)
    definitions = {view.name: view for view in topology.views}
    names = sorted(case["views"])
    reductions = 0
    for size in range(2, len(names) + 1):
        for subset in map(frozenset, combinations(names, size)):
            for pair in (("A", "C"), ("A", "D"), ("B", "C"), ("B", "D")):
                smaller = without_redundant_views(subset, pair, definitions, state.seen, state.kept)
                if smaller == subset:
                    continue
                reductions += 1
                assert _covers(topology, subset, pair, frames) == _covers(topology, smaller, pair, frames), (
                    subset,
                    smaller,
                    pair,
                )
    event("some subset reduced" if reductions else "no subset reduced")


def _covers(topology: Topology, subset: frozenset[str], pair: tuple[str, str], frames: dict[str, pl.DataFrame]) -> Any:
    narrower = choose_method(restricted(topology, subset, {pair}), topology.checks[0].k)
    views = {name: frame for name, frame in frames.items() if name in subset}
    return sorted((f.identifier_value, f.sensitive_values) for f in narrower.fresh_covers(views, None))


def test_a_view_that_only_filters_a_join_it_loses_nothing_of_is_left_out() -> None:
    """v2 shares B with v0 and v1 and has every B value they have: for (A, C), {v0, v1, v2} is {v0, v1}.
    With a B value of v1 missing from v2 it filters the join, and stays; a null B in v1 stays too (B is read
    only beside v2, so the row joins without it)."""
    views = {"v0": ("A", "B"), "v1": ("B", "C"), "v2": ("B", "E")}

    def reduced(rows: dict[str, list[dict[str, Any]]]) -> frozenset[str]:
        topology, _, state, _ = _state({"views": views, "rows": rows, "k": 2})
        definitions = {view.name: view for view in topology.views}
        return without_redundant_views(frozenset(views), ("A", "C"), definitions, state.seen, state.kept)

    v0 = [{"A": 1, "B": 1}, {"A": 2, "B": 2}]
    assert reduced({"v0": v0, "v1": [{"B": 1, "C": 1}], "v2": [{"B": 1, "E": 0}]}) == {"v0", "v1"}
    assert reduced({"v0": v0, "v1": [{"B": 1, "C": 1}, {"B": 2, "C": 2}], "v2": [{"B": 1, "E": 0}]}) == set(views)
    assert reduced({"v0": v0, "v1": [{"B": 1, "C": 1}, {"B": None, "C": 2}], "v2": [{"B": 1, "E": 0}]}) == set(views)
    # The pair's own views are never left out: v0 holds A, v1 holds C.
    assert reduced(
        {"v0": v0, "v1": [{"B": 1, "C": 1}, {"B": 2, "C": 2}], "v2": [{"B": 1, "E": 0}, {"B": 2, "E": 0}]}
    ) == {
        "v0",
        "v1",
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=publications(), cut=st.integers(0, 7))
def test_a_reduction_kept_across_batches_is_the_reduction_of_the_rows_present(case: dict[str, Any], cut: int) -> None:
    """The views' rows published in two batches, the kept relations (and the answers kept with them) living
    through both: every subset and pair reduces as it does over the same rows with nothing kept."""
    topology = _topology(case)
    method = choose_method(topology, case["k"])
    assert isinstance(method, JoinMethod)
    state = method.initialize()
    definitions = {view.name: view for view in topology.views}
    names = sorted(case["views"])
    subsets = [frozenset(chosen) for size in range(2, len(names) + 1) for chosen in combinations(names, size)]
    pairs = (("A", "C"), ("A", "D"), ("B", "C"), ("B", "D"))
    for part in (
        {name: rows[:cut] for name, rows in case["rows"].items()},
        {name: rows[cut:] for name, rows in case["rows"].items()},
    ):
        method.add(state, Batch(views=_frames(case, part)), None)
        for subset in subsets:
            for pair in pairs:
                kept = without_redundant_views(subset, pair, definitions, state.seen, state.kept)
                assert kept == without_redundant_views(subset, pair, definitions, state.seen, KeptRelations())


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 6), unique=True, max_size=7), min_size=2, max_size=4),
)
def test_the_test_in_codes_answers_as_the_joins(columns: list[list[int]]) -> None:
    """Frames of distinct codes of one attribute (empty ones among them): the counts and flags in numpy
    answer "every value the holders share is the view's" as polars' semi and anti joins do."""
    frames = tuple(pl.DataFrame({"A": values}, schema={"A": pl.UInt32}) for values in columns)
    *holders, view = frames
    reached = holders[0]
    for values in holders[1:]:
        reached = reached.join(values, on="A", how="semi")
    expected = reached.join(view, on="A", how="anti").is_empty()
    assert redundant_views._within_codes(frames, "A") == expected
    assert redundant_views._within(frames, ["A"]) == expected
