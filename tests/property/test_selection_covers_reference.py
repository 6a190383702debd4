"""The cell procedure (Yao et al. Figure 5) against the definitions, for views with selections.

Without FDs, T^v is every tuple t such that for each view, t satisfying its selection implies t's
projection is one of its rows (a witness instance plus t still yields the views); w(p) is the part
of T^v that the view of p selects and projects onto p. The reference enumerates tuples over a domain
wide enough (k + 2 values beyond every literal) that unbounded projections show at least k values.
"""

from __future__ import annotations

import datetime as dt
from itertools import product
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from streamdetect.checks.k_anonymity.selection_covers import SelectionCoverCheck
from streamdetect.model.predicates import And, Comparison, Membership, Not, Or, Predicate, attributes_of, evaluate
from streamdetect.model.topology import ViewDefinition
from tests.registered import k_anonymity_covers

ATTRIBUTES = ("A", "B", "C")


def atoms(draw: st.DrawFn) -> Predicate:
    attribute = draw(st.sampled_from(ATTRIBUTES))
    if draw(st.booleans()):
        return Comparison(attribute, draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="])), draw(st.integers(0, 3)))
    return Membership(attribute, tuple(draw(st.lists(st.integers(0, 3), min_size=1, max_size=2, unique=True))))


@st.composite
def selections(draw: st.DrawFn) -> Predicate | None:
    shape = draw(st.sampled_from(["none", "atom", "and", "or", "not", "no row", "nothing"]))
    if shape == "none":
        return None
    attribute = draw(st.sampled_from(ATTRIBUTES))
    if shape == "no row":  # satisfiable, but by no row of a table over 0..3: the view is published empty
        return Comparison(attribute, draw(st.sampled_from([">", ">="])), draw(st.sampled_from([4, 5])))
    if shape == "nothing":  # satisfied by no tuple at all
        return And((Comparison(attribute, "<", 1), Comparison(attribute, ">", 2)))
    if shape == "atom":
        return atoms(draw)
    if shape == "not":
        return Not(atoms(draw))
    pair = (atoms(draw), atoms(draw))
    return And(pair) if shape == "and" else Or(pair)


@st.composite
def publications(draw: st.DrawFn) -> dict[str, Any]:
    table = draw(st.lists(st.fixed_dictionaries({a: st.integers(0, 3) for a in ATTRIBUTES}), min_size=0, max_size=4))
    views = []
    for i in range(draw(st.integers(1, 3))):
        chosen = draw(st.lists(st.sampled_from(ATTRIBUTES), min_size=1, max_size=2, unique=True))
        projection = tuple(a for a in ATTRIBUTES if a in chosen)
        views.append(ViewDefinition(f"v{i}", projection, draw(selections())))
    identifier = draw(st.sampled_from(ATTRIBUTES))
    sensitive = draw(st.sampled_from([a for a in ATTRIBUTES if a != identifier]))
    return _case(table, views, (identifier, sensitive), draw(st.sampled_from([2, 3])))


def _case(table: list[dict[str, int]], views: list[ViewDefinition], pair: tuple[str, str], k: int) -> dict[str, Any]:
    return {"table": table, "views": tuple(views), "identifier": pair[0], "sensitive": pair[1], "k": k}


def _released(view: ViewDefinition, rows: list[dict[str, int]]) -> set[tuple[int, ...]]:
    return {tuple(r[a] for a in view.attributes) for r in rows if view.where is None or evaluate(view.where, r)}


def reference(case: dict[str, Any]) -> set[tuple[Any, frozenset[Any]]]:
    k = case["k"]
    domain = range(-k - 2, 4 + k + 2)
    released = {view.name: _released(view, case["table"]) for view in case["views"]}
    universe = []
    for values in product(domain, repeat=len(ATTRIBUTES)):
        t = dict(zip(ATTRIBUTES, values, strict=True))
        if all(
            not (view.where is None or evaluate(view.where, t))
            or tuple(t[a] for a in view.attributes) in released[view.name]
            for view in case["views"]
        ):
            universe.append(t)
    covers = set()
    for view in case["views"]:
        for fact in released[view.name]:
            tuples = [
                t
                for t in universe
                if (view.where is None or evaluate(view.where, t)) and tuple(t[a] for a in view.attributes) == fact
            ]
            ids = {t[case["identifier"]] for t in tuples}
            values = {t[case["sensitive"]] for t in tuples}
            if len(ids) == 1 and len(values) < k:
                covers.add((next(iter(ids)), frozenset(values)))
    return {(a, c) for a, c in covers if not any(b == a and other < c for b, other in covers)}


def _frames(case: dict[str, Any]) -> dict[str, pl.DataFrame]:
    return {
        view.name: pl.DataFrame(
            [dict(zip(view.attributes, row, strict=True)) for row in _released(view, case["table"])],
            schema=dict.fromkeys(view.attributes, pl.Int64),
        )
        for view in case["views"]
    }


def _found(case: dict[str, Any], method: str) -> set[tuple[Any, frozenset[Any]]]:
    check = SelectionCoverCheck(case["views"], (case["identifier"],), (case["sensitive"],), case["k"], method)
    return {(f.identifier_value, frozenset(f.sensitive_values)) for f in check.run(_frames(case))}


@pytest.mark.parametrize("method", ["enumerate", "auto"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=publications())
def test_cells_equal_the_definition(case: dict[str, Any], method: str) -> None:
    assert _found(case, method) == reference(case)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=publications())
def test_the_registered_check_equals_the_definition_with_empty_views(case: dict[str, Any]) -> None:
    """Through the Detector: views whose selection no row satisfies (published with no rows), selections
    nothing satisfies, empty tables; a view with no rows is the same given empty or not given at all.
    With the recomputed methods finding nothing until every view has rows (the silence this guards
    against), it fails at once."""
    expected = reference(case)
    parts = (ATTRIBUTES, case["identifier"], case["sensitive"], case["views"], _frames(case), case["k"])
    assert k_anonymity_covers(*parts) == expected
    assert k_anonymity_covers(*parts, present_only=True) == expected


@st.composite
def own_selections(draw: st.DrawFn) -> dict[str, Any]:
    """Publications whose selections read their own view's attributes (the common case, which the
    aggregated method always handles), over more rows and views than the reference can enumerate."""
    table = draw(st.lists(st.fixed_dictionaries({a: st.integers(0, 4) for a in ATTRIBUTES}), min_size=1, max_size=12))
    views = []
    for i in range(draw(st.integers(2, 4))):
        chosen = draw(st.lists(st.sampled_from(ATTRIBUTES), min_size=1, max_size=3, unique=True))
        projection = tuple(a for a in ATTRIBUTES if a in chosen)
        where = draw(selections())
        if where is not None and not set(attributes_of(where)) <= set(projection):
            where = None
        views.append(ViewDefinition(f"v{i}", projection, where))
    identifier = draw(st.sampled_from(ATTRIBUTES))
    sensitive = draw(st.sampled_from([a for a in ATTRIBUTES if a != identifier]))
    return {"table": table, "views": tuple(views), "identifier": identifier, "sensitive": sensitive, "k": 2}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=own_selections())
def test_aggregated_cells_equal_enumerated_cells(case: dict[str, Any]) -> None:
    """The aggregated method (joins per pattern, cells where a selection needs them) finds what
    enumerating the cells finds."""
    assert _found(case, "auto") == _found(case, "enumerate")


@st.composite
def bounded_by_a_shared_attribute(draw: st.DrawFn) -> dict[str, Any]:
    """A view alone holds the sensitive (or identifier) attribute and selects on it and on an attribute
    another view shares: a tuple outside the selection takes, as that attribute, only the values the
    selection fails for with the shared attribute's value, row by row (the aggregated method's classes)."""
    table = draw(st.lists(st.fixed_dictionaries({a: st.integers(0, 3) for a in ATTRIBUTES}), min_size=0, max_size=5))
    alone, shared, other = draw(st.permutations(ATTRIBUTES))
    where = draw(
        st.one_of(
            st.builds(lambda a, b: Or((a, b)), _atom_on(alone), _atom_on(shared)),
            st.builds(lambda a, b: And((a, b)), _atom_on(alone), _atom_on(shared)),
            st.builds(lambda a, b: Not(And((a, b))), _atom_on(alone), _atom_on(shared)),
        )
    )
    views = [ViewDefinition("v0", tuple(a for a in ATTRIBUTES if a in {alone, shared}), where)]
    views.append(ViewDefinition("v1", tuple(a for a in ATTRIBUTES if a in {shared, other})))
    if draw(st.booleans()):
        views.append(ViewDefinition("v2", (other,), draw(st.sampled_from([None, Comparison(other, ">", 1)]))))
    sensitive, identifier = (alone, other) if draw(st.booleans()) else (other, alone)
    return _case(table, views, (identifier, sensitive), draw(st.sampled_from([2, 3])))


def _atom_on(attribute: str) -> st.SearchStrategy[Predicate]:
    return st.one_of(
        st.builds(Comparison, st.just(attribute), st.sampled_from(["=", "!=", "<", ">="]), st.integers(0, 3)),
        st.builds(
            Membership, st.just(attribute), st.lists(st.integers(0, 3), min_size=1, max_size=2, unique=True).map(tuple)
        ),
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=bounded_by_a_shared_attribute())
def test_a_selection_bounding_a_projected_attribute_by_a_shared_one_equals_the_definition(case: dict[str, Any]) -> None:
    """Aggregated (no cells enumerated: the selection splits the shared attribute's rows into classes)
    and enumerated, both equal to the definition."""
    expected = reference(case)
    assert _found(case, "aggregate") == expected
    assert _found(case, "enumerate") == expected


EPOCH = dt.date(2000, 1, 1)


def _as_date(value: Any) -> Any:
    return (EPOCH + dt.timedelta(days=value)).isoformat() if isinstance(value, int) else value


def _dated(predicate: Predicate, attribute: str) -> Predicate:
    """``predicate`` with ``attribute``'s literals written as the ISO dates of their day numbers."""
    if isinstance(predicate, Not):
        return Not(_dated(predicate.operand, attribute))
    if isinstance(predicate, (And, Or)):
        return type(predicate)(tuple(_dated(operand, attribute) for operand in predicate.operands))
    if predicate.attribute != attribute:
        return predicate
    if isinstance(predicate, Comparison):
        return Comparison(attribute, predicate.operator, _as_date(predicate.value))
    return Membership(attribute, tuple(_as_date(v) for v in predicate.values), predicate.negated)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=publications(), attribute=st.sampled_from(ATTRIBUTES), method=st.sampled_from(["auto", "enumerate"]))
@example(  # B, a date no view holds, is after any day outside v1's selection: unbounded, as the integers are
    case=_case(
        [{"A": 0, "B": 0, "C": 0}],
        [ViewDefinition("v0", ("A",)), ViewDefinition("v1", ("A",), Comparison("B", "<", 0))],
        ("A", "B"),
        2,
    ),
    attribute="B",
    method="auto",
)
def test_a_date_attribute_behaves_as_its_day_numbers(case: dict[str, Any], attribute: str, method: str) -> None:
    """The same publication with one attribute a date (its values and its literals the days from an epoch):
    the same covers, day for day. A date selection once read every row as failing both ways (a date never
    equalled its ISO literal), so disclosures through it went unreported."""
    views = tuple(
        ViewDefinition(v.name, v.attributes, _dated(v.where, attribute) if v.where is not None else None)
        for v in case["views"]
    )
    frames = {
        name: frame.with_columns((pl.lit(EPOCH) + pl.duration(days=pl.col(attribute))).alias(attribute))
        if attribute in frame.columns
        else frame
        for name, frame in _frames(case).items()
    }
    pair = (case["identifier"],), (case["sensitive"],)
    check = SelectionCoverCheck(views, *pair, case["k"], method, dates=frozenset({attribute}))
    back = {(f.identifier_value, frozenset(f.sensitive_values)) for f in check.run(frames)}
    day = {EPOCH + dt.timedelta(days=n): n for n in range(-100, 100)}
    undated = {(day.get(a, a), frozenset(day.get(v, v) for v in values)) for a, values in back}
    assert undated == _found(case, method)
