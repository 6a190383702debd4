"""k-RSIND's partition against the CSIND graph built pair by pair from the definition (section 3.2).

The check never lists pairs: it reads CSIND from keys (value classes, images, stability) and finds the
graph's components by grouping. Here the graph is built by brute force, every pair of rows against the
definition (each view's image of each row under each current value), and the partition must be made of
its cliques, inside its components, every row once; a component that is a clique must be one block; with
one value class and every view projecting P, the findings are exactly the components below k. Updates by
random additions and withdrawals (rows repeated, null private values, selections no row satisfies,
everything withdrawn) give the findings of a fresh check of the rows present.
"""

from __future__ import annotations

import random
from itertools import combinations, permutations
from typing import Any

import networkx as nx
import polars as pl
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from streamdetect.checks.findings import Delta
from streamdetect.checks.indistinguishability.csind import clique_groups, compatible, row_nodes, value_classes
from streamdetect.checks.indistinguishability.rsind import RsindCheck
from streamdetect.model.predicates import And, Comparison, Membership, Or, Predicate
from streamdetect.model.topology import ViewDefinition
from tests.property.test_sind_reference import _holds
from tests.steps import additions_and_withdrawals

VALUES = ["x", "y", "z"]
SCHEMA = {"A": pl.Int64, "B": pl.Int64, "P": pl.String}


@st.composite
def cases(draw: st.DrawFn, on_private: bool = True) -> dict[str, Any]:
    """Rows over (A, B, P), public values repeated, P sometimes null; one to three views, projecting P or
    not, selecting on A, on P, on both, or on nothing, some selecting no row."""
    rows = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "A": st.integers(0, 2),
                    "B": st.integers(0, 1),
                    "P": st.sampled_from(VALUES) | st.none() if on_private else st.sampled_from(VALUES),
                }
            ),
            max_size=9,
        )
    )
    views = []
    for i in range(draw(st.integers(1, 3))):
        public = draw(st.lists(st.sampled_from(["A", "B"]), max_size=2, unique=True))
        projects = draw(st.booleans()) or not public
        on_a = Comparison("A", "=", draw(st.integers(0, 3)))
        on_p = Membership("P", tuple(draw(st.lists(st.sampled_from(VALUES), min_size=1, max_size=2, unique=True))))
        choices: list[Predicate | None] = [None, on_a]
        if on_private:
            choices += [on_p, Or((on_a, on_p)), And((on_a, on_p))]
        where = draw(st.sampled_from(choices))
        views.append(ViewDefinition(f"v{i}", (*public, *(["P"] if projects else [])), where))
    return {"rows": rows, "views": tuple(views), "k": draw(st.integers(2, 3))}


def _image(view: ViewDefinition, row: dict[str, Any], value: Any) -> tuple[Any, ...] | None:
    instance = {**row, "P": value}
    return tuple(instance[a] for a in view.attributes) if _holds(view.where, instance) else None


def _csind(views: tuple[ViewDefinition, ...], left: dict[str, Any], right: dict[str, Any]) -> bool:
    """Section 3.2's CSIND of two rows, read literally."""
    p1, p2 = left["P"], right["P"]
    for view in views:
        if "P" in view.attributes:
            same = _image(view, left, p1) == _image(view, right, p1) and _image(view, left, p2) == _image(
                view, right, p2
            )
        else:
            same = _image(view, left, p1) == _image(view, left, p2) and _image(view, right, p1) == _image(
                view, right, p2
            )
        if not same:
            return False
    return True


def _graph(case: dict[str, Any]) -> nx.Graph:
    graph = nx.Graph()
    graph.add_nodes_from(range(len(case["rows"])))
    for i, j in combinations(range(len(case["rows"])), 2):
        if _csind(case["views"], case["rows"][i], case["rows"][j]):
            graph.add_edge(i, j)
    return graph


def _frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=SCHEMA)


def _checked(case: dict[str, Any]) -> tuple[RsindCheck, Any]:
    check = RsindCheck(case["views"], ("A", "B"), ("P",), k=case["k"])
    state = check.initialize()
    check.update(state, _frame(case["rows"]))
    return check, state


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_nodes_read_csind_as_the_definition_does(case: dict[str, Any]) -> None:
    """Two rows are CSIND iff their nodes are compatible, iff the nodes share a clique group."""
    frame = _frame(case["rows"])
    nodes = list(row_nodes(frame, case["views"], "P", value_classes(case["views"], frame, "P")))
    for i, j in combinations(range(len(nodes)), 2):
        expected = _csind(case["views"], case["rows"][i], case["rows"][j])
        assert compatible(nodes[i], nodes[j]) == expected
        assert bool(set(clique_groups(nodes[i])) & set(clique_groups(nodes[j]))) == expected


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_blocks_are_cliques_inside_components_and_cover_every_row(case: dict[str, Any]) -> None:
    check, state = _checked(case)
    blocks = check.partition(state, "P")
    graph = _graph(case)
    assert sorted(row for block in blocks for row in block) == list(range(len(case["rows"])))
    component = {row: n for n, rows in enumerate(nx.connected_components(graph)) for row in rows}
    for block in blocks:
        assert all(graph.has_edge(i, j) for i, j in combinations(block, 2)), block
        assert len({component[row] for row in block}) == 1
    # The heuristic cannot miss a component that is a clique: it is one block.
    for rows in nx.connected_components(graph):
        if all(graph.has_edge(i, j) for i, j in combinations(rows, 2)):
            assert sorted(rows) in blocks


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(on_private=False))
def test_one_value_class_gives_the_components_below_k_exactly(case: dict[str, Any]) -> None:
    """No selection mentions P: CSIND is an equivalence, the partition optimal; when every view projects
    P the findings are violations in fact (``exact``)."""
    check, state = _checked(case)
    graph = _graph(case)
    components = [sorted(rows) for rows in nx.connected_components(graph)]
    for rows in components:
        assert all(graph.has_edge(i, j) for i, j in combinations(rows, 2))
    assert sorted(check.partition(state, "P")) == sorted(components)
    findings = check.result(state)
    small = [rows for rows in components if len(rows) < case["k"]]
    assert len(findings) == len(small)
    assert all(f.exact == all("P" in view.attributes for view in case["views"]) for f in findings)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.randoms(use_true_random=False))
def test_updates_give_the_findings_of_a_fresh_check(case: dict[str, Any], rng: random.Random) -> None:
    """Additions and withdrawals in random steps (the table emptied at the end): after each, the findings
    are those of a fresh check of the rows present, and the deltas replay to them."""
    check = RsindCheck(case["views"], ("A", "B"), ("P",), k=case["k"])
    state = check.initialize()
    open_ids: set[str] = set()
    for added, withdrawn, present in additions_and_withdrawals({"t": case["rows"]}, random.Random(rng.random())):
        delta: Delta[Any] = check.update(
            state,
            _frame(added["t"]) if "t" in added else None,
            _frame(withdrawn["t"]) if "t" in withdrawn else None,
        )
        open_ids -= {f.id for f in delta.cleared}
        open_ids |= {f.id for f in delta.raised}
        fresh_check, fresh = _checked({**case, "rows": list(present["t"])})
        expected = {f.id for f in fresh_check.result(fresh)}
        assert {f.id for f in check.result(state)} == expected
        assert open_ids == expected


def test_blocks_that_give_the_same_finding_open_it_once_and_close_it_when_none_does() -> None:
    """Two rows with the same public values but told apart by the selection (P = 'x' publishes one, not
    the other) are two blocks of one row each, and the same finding. A later row joining one of those
    blocks' components must not clear it while the other block still gives it."""
    views = (ViewDefinition("v0", ("A",), where=Membership("P", ("x",), negated=False)),)
    check = RsindCheck(views, ("A", "B"), ("P",), k=2)
    state = check.initialize()
    steps = [
        [{"A": 1, "B": 1, "P": None}, {"A": 1, "B": 1, "P": "x"}],
        [{"A": 0, "B": 0, "P": None}],
    ]
    open_ids: set[str] = set()
    present: list[dict[str, Any]] = []
    for rows in steps:
        delta = check.update(state, _frame(rows))
        open_ids -= {f.id for f in delta.cleared}
        open_ids |= {f.id for f in delta.raised}
        present.extend(rows)
        fresh_check, fresh = _checked({"rows": present, "views": views, "k": 2})
        found = [f.id for f in check.result(state)]
        assert len(found) == len(set(found))  # each finding once
        assert open_ids == set(found) == {f.id for f in fresh_check.result(fresh)}
    assert len(open_ids) == 1


#: Rows that tie on weight in one component: the nodes' order must come from the rows, not their arrival.
TIED = {
    "rows": [
        {"A": 0, "B": 0, "P": None},
        {"A": 0, "B": 0, "P": None},
        {"A": 0, "B": 0, "P": "x"},
        {"A": 1, "B": 0, "P": "x"},
        {"A": 1, "B": 0, "P": None},
    ],
    "views": (
        ViewDefinition("v0", ("A", "P"), Membership("P", ("x",))),
        ViewDefinition("v1", ("P",)),
    ),
    "k": 2,
}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.randoms(use_true_random=False), st.integers(1, 4))
@example(TIED, random.Random(0), 1)
@example(TIED, random.Random(1), 2)
@example(TIED, random.Random(2), 1)
def test_findings_depend_on_the_bag_of_rows_only(case: dict[str, Any], rng: random.Random, pieces: int) -> None:
    """The heuristic's blocks (and the findings' ids) do not depend on the order rows arrived in, nor on
    how they were cut into updates: a replica that rebuilt the rows otherwise reports the same."""
    _, state = _checked(case)
    check = RsindCheck(case["views"], ("A", "B"), ("P",), k=case["k"])
    expected = sorted(f.id for f in check.result(state))
    shuffled = list(reversed(case["rows"]))
    rng.shuffle(shuffled)
    other = check.initialize()
    size = -(-len(shuffled) // pieces) or 1
    for start in range(0, len(shuffled), size):
        check.update(other, _frame(shuffled[start : start + size]))
    assert sorted(f.id for f in check.result(other)) == expected


def test_every_order_of_tied_rows_gives_the_same_findings() -> None:
    check = RsindCheck(TIED["views"], ("A", "B"), ("P",), k=2)
    found = set()
    for order in permutations(TIED["rows"]):
        state = check.initialize()
        check.update(state, _frame(list(order)))
        found.add(tuple(sorted(f.id for f in check.result(state))))
    assert len(found) == 1
