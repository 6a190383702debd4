"""k-RSIND: every block the heuristic returns is an RSIND set by Definition 3 (enumerating instances)
when every view projects the private attribute, and a clique of CSIND pairs in any case; blocks cover
every tuple once."""

from __future__ import annotations

from collections import Counter
from itertools import product
from typing import Any

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamdetect.checks.indistinguishability.rsind import RsindCheck
from streamdetect.model.predicates import Comparison, Membership, Or, Predicate
from streamdetect.model.topology import ViewDefinition
from tests.property.test_sind_reference import DOMAIN, _holds, tables


@st.composite
def publications(draw: st.DrawFn) -> dict[str, Any]:
    rows, private = draw(tables())
    views = []
    for i in range(draw(st.integers(1, 2))):
        projection = (*draw(st.lists(st.sampled_from(["A", "B"]), max_size=1, unique=True)), "P")
        on_b = Comparison(draw(st.sampled_from(["A", "B"])), "=", draw(st.integers(0, 1)))
        on_p = Membership("P", (draw(st.sampled_from(DOMAIN)),))
        where: Predicate | None = draw(st.sampled_from([None, on_b, on_p, Or((on_b, on_p))]))
        views.append(ViewDefinition(f"v{i}", projection, where))
    return {"rows": rows, "private": private, "views": tuple(views)}


def _released(case: dict[str, Any], assignment: tuple[Any, ...]) -> list[Counter[tuple[Any, ...]]]:
    rows = [{**row, "P": p} for row, p in zip(case["rows"], assignment, strict=True)]
    return [
        Counter(tuple(r[a] for a in view.attributes) for r in rows if _holds(view.where, r)) for view in case["views"]
    ]


def _is_rsind_set(case: dict[str, Any], block: list[int]) -> bool:
    """Definition 3 with P_i = the block's current values, over every instance yielding the views."""
    actual = _released(case, tuple(case["private"]))
    valid = {a for a in product(DOMAIN, repeat=len(case["rows"])) if _released(case, a) == actual}
    values = {case["private"][i] for i in block}
    for i in block:
        for j in block:
            if i >= j:
                continue
            for assignment in valid:
                if assignment[i] in values and assignment[j] in values:
                    swapped = list(assignment)
                    swapped[i], swapped[j] = swapped[j], swapped[i]
                    if tuple(swapped) not in valid:
                        return False
    return True


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(publications())
def test_blocks_are_rsind_sets_and_cover_every_tuple(case: dict[str, Any]) -> None:
    check = RsindCheck(case["views"], ("A", "B"), ("P",), k=2)
    state = check.initialize()
    table = pl.DataFrame([{**row, "P": p} for row, p in zip(case["rows"], case["private"], strict=True)])
    check.update(state, table)
    blocks = check.partition(state, "P")
    assert sorted(row for block in blocks for row in block) == list(range(len(case["rows"])))
    for block in blocks:
        assert _is_rsind_set(case, block)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(publications(), st.randoms(use_true_random=False))
def test_findings_do_not_depend_on_the_order_of_rows(case: dict[str, Any], rng: Any) -> None:
    """The partition is a heuristic; run on a canonical order, its findings (and ids) depend on the bag of
    rows only: a replica that rebuilt the rows in another order must report the same."""
    check = RsindCheck(case["views"], ("A", "B"), ("P",), k=2)
    rows = [{**row, "P": p} for row, p in zip(case["rows"], case["private"], strict=True)]
    shuffled = list(rows)
    rng.shuffle(shuffled)
    ids = []
    for order in (rows, shuffled):
        state = check.initialize()
        check.update(state, pl.DataFrame(order))
        ids.append(sorted(f.id for f in check.result(state)))
    assert ids[0] == ids[1]
