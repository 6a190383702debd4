"""Exact row count of a natural join without materialising it (counting over a join tree).

Each relation is grouped by its join attributes with a multiplicity; counts are multiplied along the
join tree and summed per separator value, leaves to root: the sum-product of the counting semiring.
O(sum of relation sizes) plus any bag a cycle forces (see :mod:`streamdetect.relational.join_tree`).
Float64 arithmetic: exact up to 2^53 rows, approximate beyond (reported as such by callers).
"""

from __future__ import annotations

from collections.abc import Mapping

import networkx as nx
import polars as pl

from streamdetect.relational.join_tree import build_join_tree

EXACT_LIMIT = 2**53


def join_count(relations: Mapping[str, pl.DataFrame]) -> float:
    """Rows of the natural join of distinct-row ``relations`` (a connected schema)."""
    if any(frame.is_empty() for frame in relations.values()):
        return 0.0
    if len(relations) == 1:
        return float(next(iter(relations.values())).height)
    counts: dict[str, int] = {}
    for frame in relations.values():
        for column in frame.columns:
            counts[column] = counts.get(column, 0) + 1
    weighted: dict[str, pl.DataFrame] = {}
    for i, (name, frame) in enumerate(relations.items()):
        keys = [column for column in frame.columns if counts[column] > 1]
        weighted[name] = frame.drop_nulls(keys).group_by(keys).agg(pl.len().cast(pl.Float64).alias(f"\0w{i}"))
    plan = build_join_tree(weighted)
    root = min(plan.relations)
    parents = dict(nx.bfs_predecessors(plan.tree, root))
    messages: dict[str, pl.DataFrame] = {}
    total = 0.0
    for node in nx.dfs_postorder_nodes(plan.tree, root):
        frame = plan.relations[node]
        weights = [column for column in frame.columns if column.startswith("\0w")]
        product = pl.lit(1.0)
        for column in weights:
            product = product * pl.col(column)
        frame = frame.with_columns(product.alias("\0n")).drop(weights)
        for child, parent in parents.items():
            if parent == node:
                on = plan.separator(child, node)
                frame = frame.join(messages[child], on=on).with_columns(pl.col("\0n") * pl.col("\0m")).drop("\0m")
        if node == root:
            total = float(frame.get_column("\0n").sum())
        else:
            on = plan.separator(node, parents[node])
            messages[node] = frame.group_by(on).agg(pl.col("\0n").sum().alias("\0m"))
    return total
