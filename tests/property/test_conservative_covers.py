"""With effective FDs, the conservative check (Yao et al. section 7) never misses a violation: every
identifier value with an association cover below k (enumerating every instance that yields the views
and satisfies the FDs) has a finding."""

from __future__ import annotations

from typing import Any

import polars as pl
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from streamdetect.checks.k_anonymity.conservative_covers import ConservativeCoverCheck
from streamdetect.checks.k_anonymity.functional_dependencies import effective_dependencies
from streamdetect.model.topology import FunctionalDependency, ViewDefinition
from tests.reference import association_cover_reference, satisfies
from tests.registered import k_anonymity_covers

ATTRIBUTES = ("A", "B", "C")


@st.composite
def publications(draw: st.DrawFn) -> dict[str, Any]:
    table = draw(st.lists(st.fixed_dictionaries({a: st.integers(0, 1) for a in ATTRIBUTES}), min_size=0, max_size=4))
    lhs = draw(st.sampled_from(ATTRIBUTES))
    rhs = draw(st.sampled_from([a for a in ATTRIBUTES if a != lhs]))
    assume(satisfies(table, [((lhs,), rhs)]))
    views = {"v0": ("A", "B"), "v1": ("B", "C")} if draw(st.booleans()) else {"v0": ("A", "C"), "v1": ("B", "C")}
    rows = {
        name: [dict(items) for items in {tuple((a, row[a]) for a in schema) for row in table}]
        for name, schema in views.items()
    }
    identifier = draw(st.sampled_from(ATTRIBUTES))
    sensitive = draw(st.sampled_from([a for a in ATTRIBUTES if a != identifier]))
    return {
        "table": table,
        "views": views,
        "rows": rows,
        "fd": ((lhs,), rhs),
        "identifier": identifier,
        "sensitive": sensitive,
        "k": draw(st.sampled_from([2, 3])),
    }


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(publications())
def test_conservative_check_never_misses(case: dict[str, Any]) -> None:
    views = tuple(ViewDefinition(name, schema) for name, schema in case["views"].items())
    lhs, rhs = case["fd"]
    dependencies = (FunctionalDependency(lhs, (rhs,)),)
    check = ConservativeCoverCheck(
        views,
        (case["identifier"],),
        (case["sensitive"],),
        tuple(effective_dependencies(views, dependencies)),
        case["k"],
    )
    frames = {
        name: pl.DataFrame(case["rows"][name], schema=dict.fromkeys(s, pl.Int64)) for name, s in case["views"].items()
    }
    table = pl.DataFrame(case["table"], schema=dict.fromkeys(ATTRIBUTES, pl.Int64))
    flagged = {f.identifier_value for f in check.run(frames, table)}
    truth = association_cover_reference(
        ATTRIBUTES, case["views"], case["rows"], [case["identifier"]], [case["sensitive"]], case["k"], [case["fd"]]
    )
    assert {value for _, value, _, _ in truth} <= flagged
    # The registered check (the method the topology calls for), fed as ``check`` and as a stream feeds it.
    parts = (ATTRIBUTES, case["identifier"], case["sensitive"], views, frames, case["k"])
    for present_only in (False, True):
        covers = k_anonymity_covers(*parts, dependencies=dependencies, table=table, present_only=present_only)
        assert {value for _, value, _, _ in truth} <= {value for value, _ in covers}
