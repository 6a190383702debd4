"""Join counting and capped materialisation against nested-loop joins."""

from __future__ import annotations

from typing import Any

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamdetect.relational.join_count import join_count
from streamdetect.relational.join_tree import build_join_tree
from streamdetect.relational.materialise import materialise
from tests.reference import connected, natural_join

SCHEMAS = st.sampled_from(
    [
        {"r": ("A", "B"), "s": ("B", "C")},
        {"r": ("A", "B"), "s": ("B", "C"), "t": ("A", "C")},
        {"r": ("A", "B"), "s": ("B", "C"), "t": ("C", "D"), "u": ("A", "D")},
        {"r": ("A", "B", "C"), "s": ("C", "D"), "t": ("D", "A"), "u": ("B",)},
        {"r": ("A",), "s": ("A", "B"), "t": ("B", "C", "D"), "u": ("D", "A")},
    ]
)


@st.composite
def relations(draw: st.DrawFn) -> tuple[dict[str, tuple[str, ...]], dict[str, list[dict[str, Any]]]]:
    schemas = draw(SCHEMAS)
    assert connected(schemas, tuple(schemas))
    rows = {
        name: draw(
            st.lists(
                st.fixed_dictionaries({a: st.integers(0, 3) for a in schema}),
                max_size=10,
                unique_by=lambda r: tuple(sorted(r.items())),
            )
        )
        for name, schema in schemas.items()
    }
    return schemas, rows


def _frames(schemas: dict[str, tuple[str, ...]], rows: dict[str, list[dict[str, Any]]]) -> dict[str, pl.DataFrame]:
    return {name: pl.DataFrame(rows[name], schema=dict.fromkeys(schema, pl.Int64)) for name, schema in schemas.items()}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(relations())
def test_join_count_is_exact(case: Any) -> None:
    schemas, rows = case
    assert join_count(_frames(schemas, rows)) == len(natural_join(list(rows.values())))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(relations(), st.integers(1, 12))
def test_materialise_returns_min_of_limit_and_count_true_join_rows(case: Any, limit: int) -> None:
    schemas, rows = case
    full = natural_join(list(rows.values()))
    taken = materialise(_frames(schemas, rows), limit)
    assert taken.height == min(limit, len(full))
    truth = {tuple(sorted(row.items())) for row in full}
    assert all(tuple(sorted(row.items())) in truth for row in taken.iter_rows(named=True))
    assert taken.unique().height == taken.height


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(relations())
def test_join_tree_keeps_the_join_and_is_acyclic(case: Any) -> None:
    schemas, rows = case
    frames = _frames(schemas, rows)
    plan = build_join_tree(frames)
    # Running intersection: the nodes holding an attribute form a connected subtree.
    for attribute in {a for schema in schemas.values() for a in schema}:
        holders = [n for n, f in plan.relations.items() if attribute in f.columns]
        assert plan.tree.subgraph(holders).number_of_nodes() == len(holders)
        import networkx as nx

        assert nx.is_connected(plan.tree.subgraph(holders))
    merged_rows = [frame.to_dicts() for frame in plan.relations.values()]
    assert {tuple(sorted(r.items())) for r in natural_join(merged_rows)} == {
        tuple(sorted(r.items())) for r in natural_join(list(rows.values()))
    }
