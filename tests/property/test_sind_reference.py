"""SIND classes against Definition 1, by enumerating every assignment of private values.

Exact subcase (selections on public attributes only): the partition is never coarser than the
definition's, and it separates two SIND tuples only when no instance gives them different private
values (then the swap is trivial; Proposition 5's "only if" needs such an instance, which the paper's
"two possible private values" does not quite ensure). With a
selection on the private attribute, the conservative partition is never coarser than the true one
(it may split true classes, never join tuples that are not SIND): no violation is missed.
"""

from __future__ import annotations

import itertools
from typing import Any
from unittest.mock import patch

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamdetect.checks.indistinguishability.sind import SindCheck
from streamdetect.errors import TopologyError
from streamdetect.model.predicates import And, Comparison, Membership, Or, Predicate
from streamdetect.model.topology import ViewDefinition
from tests.reference import sind_reference

PUBLIC = ("A", "B")
DOMAIN = ["x", "y", "z"]


def _holds(predicate: Predicate | None, row: dict[str, Any]) -> bool:
    if predicate is None:
        return True
    if isinstance(predicate, Comparison):
        value = row[predicate.attribute]
        return {"=": value == predicate.value, "!=": value != predicate.value}[predicate.operator]
    if isinstance(predicate, And):
        return all(_holds(operand, row) for operand in predicate.operands)
    if isinstance(predicate, Or):
        return any(_holds(operand, row) for operand in predicate.operands)
    assert isinstance(predicate, Membership)
    return (row[predicate.attribute] in predicate.values) != predicate.negated


@st.composite
def tables(draw: st.DrawFn) -> tuple[list[dict[str, int]], list[str]]:
    """2 to 5 public tuples over (A, B), a key, and their private values."""
    size = draw(st.integers(2, 5))
    rows = draw(
        st.lists(
            st.fixed_dictionaries({"A": st.integers(0, 2), "B": st.integers(0, 1)}),
            min_size=size,
            max_size=size,
            unique_by=lambda r: (r["A"], r["B"]),
        )
    )
    private = draw(st.lists(st.sampled_from(DOMAIN), min_size=len(rows), max_size=len(rows)))
    return rows, private


@st.composite
def publications(draw: st.DrawFn, on_private: bool) -> dict[str, Any]:
    rows, private = draw(tables())
    views = []
    for i in range(draw(st.integers(1, 2))):
        projection = (*draw(st.lists(st.sampled_from(["A", "B"]), max_size=2, unique=True)), "P")
        attribute = draw(st.sampled_from(["A", "B", "P"] if on_private else ["A", "B"]))
        if attribute == "P":
            where: Predicate | None = Membership(
                "P", tuple(draw(st.lists(st.sampled_from(DOMAIN), min_size=1, max_size=2, unique=True)))
            )
        else:
            where = draw(st.none() | st.just(Comparison(attribute, "=", draw(st.integers(0, 1)))))
        views.append(ViewDefinition(f"v{i}", projection, where))
    return {"rows": rows, "private": private, "views": tuple(views)}


def _ours(case: dict[str, Any]) -> tuple[list[set[int]], bool]:
    check = SindCheck(case["views"], PUBLIC, ("P",), k=2)
    table = pl.DataFrame([{**row, "P": p} for row, p in zip(case["rows"], case["private"], strict=True)])
    state = check.initialize()
    check.update(state, table)
    position = {(row["A"], row["B"]): i for i, row in enumerate(case["rows"])}
    classes = check.partition(state, "P")
    return [{position[(dict(m)["A"], dict(m)["B"])] for m in c.members} for c in classes], all(c.exact for c in classes)


def _reference(case: dict[str, Any]) -> tuple[list[set[int]], list[set[Any]], list[tuple[Any, ...]]]:
    views = [(view.attributes, lambda r, w=view.where: _holds(w, r)) for view in case["views"]]
    return sind_reference(case["rows"], case["private"], DOMAIN, views, "P")


def _finer_or_equal(ours: list[set[int]], truth: list[set[int]]) -> bool:
    return all(any(group <= true for true in truth) for group in ours)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(publications(on_private=False))
def test_exact_partition_equals_definition(case: dict[str, Any]) -> None:
    ours, exact = _ours(case)
    truth, _, instances = _reference(case)
    assert exact
    assert _finer_or_equal(ours, truth)
    together = {(i, j) for group in ours for i in group for j in group}
    for group in truth:
        for i in group:
            for j in group:
                if (i, j) not in together:
                    assert all(instance[i] == instance[j] for instance in instances)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(publications(on_private=True))
def test_conservative_partition_never_joins_tuples_that_are_not_sind(case: dict[str, Any]) -> None:
    ours, _ = _ours(case)
    truth, _, _ = _reference(case)
    assert _finer_or_equal(ours, truth)


def test_conservative_signature_separates_tuples_the_selection_treats_differently() -> None:
    # b0 is always selected; b1 only when its private value is 'x'. They cannot swap 'y' for 'x'.
    where = Or((Comparison("A", "=", 0), Membership("P", ("x",))))
    case = {
        "rows": [{"A": 0, "B": 0}, {"A": 1, "B": 0}],
        "private": ["y", "y"],
        "views": (ViewDefinition("v0", ("P",), where),),
    }
    ours, exact = _ours(case)
    truth, _, _ = _reference(case)
    assert not exact
    assert sorted(map(sorted, truth)) == [[0], [1]]
    assert sorted(map(sorted, ours)) == [[0], [1]]


def _findings(case: dict[str, Any]) -> list[Any]:
    check = SindCheck(case["views"], PUBLIC, ("P",), k=2, domains={"P": tuple(DOMAIN)})
    table = pl.DataFrame([{**row, "P": p} for row, p in zip(case["rows"], case["private"], strict=True)])
    state = check.initialize()
    return list(check.update(state, table).raised)


def _positions(case: dict[str, Any], finding: Any) -> frozenset[int]:
    position = {(row["A"], row["B"]): i for i, row in enumerate(case["rows"])}
    return frozenset(position[(dict(m)["A"], dict(m)["B"])] for m in finding.members)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.booleans().flatmap(lambda on_private: publications(on_private=on_private)))
def test_exact_findings_equal_the_definition(case: dict[str, Any]) -> None:
    """Findings marked exact are the definition's: classes below k, and classes whose members have one
    possible value in every instance (multiset views, every assignment enumerated)."""
    truth, possible, _ = _reference(case)
    findings = _findings(case)
    certain = {i for i, values in enumerate(possible) if len(values) == 1}
    reference = {frozenset(group) for group in truth if len(group) < 2 or group <= certain}
    exact = {_positions(case, f) for f in findings if f.exact}
    flagged = {i for f in findings for i in _positions(case, f)}
    # Nothing the definition flags is missed, exact or not.
    assert {i for group in reference for i in group} <= flagged
    for f in findings:
        if f.exact and "only one private value" in f.reason:
            assert _positions(case, f) <= certain  # SAT's verdict is the enumeration's
    # Every finding marked exact is one of the definition's, and every class of tuples that can take only
    # one value is reported exactly (SAT decides it with any selections).
    assert exact <= reference
    assert {group for group in reference if group <= certain} <= exact
    on_private = any("P" in view.selection_attributes for view in case["views"])
    if not on_private:
        assert exact == reference


def test_tuples_that_never_differ_are_one_class_whatever_their_signatures() -> None:
    """Rows 0 and 1 differ in signature (only row 0 is in v1's selection) but every instance gives them
    the same value (x, x or y, y): they swap trivially, so they are one class of two, not two findings.
    Found by hypothesis against the definition; Proposition 5's "only if" assumes an instance where they
    differ."""
    case = {
        "rows": [{"A": 0, "B": 0}, {"A": 2, "B": 1}, {"A": 0, "B": 1}, {"A": 1, "B": 0}, {"A": 2, "B": 0}],
        "private": ["x", "x", "y", "x", "y"],
        "views": (
            ViewDefinition("v0", ("A", "P")),
            ViewDefinition("v1", ("P",), Comparison("B", "=", 0)),
        ),
    }
    truth, _, _ = _reference(case)
    assert sorted(map(sorted, truth)) == [[0, 1], [2, 4], [3]]
    assert {_positions(case, f) for f in _findings(case)} == {frozenset({3})}


@st.composite
def wide_publications(draw: st.DrawFn) -> tuple[pl.DataFrame, tuple[ViewDefinition, ...]]:
    """Tables of up to 30 rows over a key (A, B), a private P (text or whole numbers, nulls too), and one
    to three views projecting P, some with a selection on the public attributes: the exact subcase."""
    keys = draw(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 4)), max_size=30, unique=True))
    numbers = draw(st.booleans())
    values = st.integers(0, 3) if numbers else st.sampled_from(["x", "y", "z", "10", "9"])
    private = draw(st.lists(values | st.none(), min_size=len(keys), max_size=len(keys)))
    views = []
    for i in range(draw(st.integers(1, 3))):
        projection = (*draw(st.lists(st.sampled_from(["A", "B"]), max_size=2, unique=True)), "P")
        where = draw(st.none() | st.builds(Comparison, st.sampled_from(["A", "B"]), st.just("="), st.integers(0, 2)))
        views.append(ViewDefinition(f"v{i}", projection, where))
    schema = {"A": pl.Int64, "B": pl.Int64, "P": pl.Int64 if numbers else pl.String}
    table = pl.DataFrame([{"A": a, "B": b, "P": p} for (a, b), p in zip(keys, private, strict=True)], schema=schema)
    return table, tuple(views)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(wide_publications(), st.integers(2, 3), st.randoms(use_true_random=False))
def test_the_paths_without_sat_give_the_general_paths_findings(
    publication: tuple[pl.DataFrame, tuple[ViewDefinition, ...]], k: int, rng: Any
) -> None:
    """Where no class needs a SAT call, the findings come from the classes kept under arrivals
    (SindCheck._certain_classes, kept_classes), without a Python object per class. Fed in random batches,
    some withdrawing rows: after each, the general path's findings on the rows present, in its order, with
    its ids."""
    table, views = publication
    check = SindCheck(views, PUBLIC, ("P",), k=k)
    state = check.initialize()
    cuts = sorted(rng.sample(range(table.height + 1), k=min(3, table.height + 1)))
    for start, end in itertools.pairwise([0, *cuts, table.height]):
        withdrawn = None
        if state.rows is not None and state.rows.height and rng.random() < 0.3:
            withdrawn = state.rows.slice(rng.randrange(state.rows.height), 1)
        check.update(state, table.slice(start, end - start), withdrawn)
        if state.rows is None:
            continue
        fast = check.result(state)
        fresh = check.initialize()
        check.update(fresh, state.rows)
        with patch.object(SindCheck, "_certain_classes", lambda *_: None):
            general = check.result(fresh)
        assert [f.id for f in fast] == [f.id for f in general]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2) | st.none()), max_size=6),
            st.integers(0, 3),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_a_batch_is_refused_exactly_when_the_public_values_stop_being_a_key(
    steps: list[tuple[list[tuple[int, int | None]], int]],
) -> None:
    """Batches of rows (public values drawn from a small range, nulls too, so they repeat), some
    withdrawing a row kept: each batch is refused exactly when the rows kept after it repeat public values
    (the whole scan's verdict), whether the batch's rows are looked up among the kept rows' hashes or joined
    with them (after a withdrawal), and a refused batch leaves the state as it was."""
    check = SindCheck((ViewDefinition("v", ("A", "P")),), PUBLIC, ("P",), k=2)
    state = check.initialize()
    schema = {"A": pl.Int64, "B": pl.Int64, "P": pl.String}
    for added, withdraw in steps:
        batch = pl.DataFrame([{"A": a, "B": b, "P": "x"} for a, b in added], schema=schema)
        withdrawn = None
        if withdraw and state.rows is not None and state.rows.height:
            withdrawn = state.rows.slice(withdraw % state.rows.height, 1)
        after = state.folded(batch, withdrawn, ["A", "B", "P"])
        repeats = after is not None and bool(after.select(PUBLIC).is_duplicated().any())
        before = state.rows
        if repeats:
            with pytest.raises(TopologyError, match="not a key of the table"):
                check.update(state, batch, withdrawn)
            assert state.rows is before
        else:
            check.update(state, batch, withdrawn)
