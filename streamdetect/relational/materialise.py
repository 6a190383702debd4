"""Materialise a natural join up to a row cap, never building more than the cap (plus one fan-out).

Used to write the paper's merged universal-relation stream (Dou & Coulondre, section 3.3) for
inspection. After Yannakakis' upward reduction every partial join row extends to at least one full
row, so rows can be taken root-first: each join step keeps only the shortest prefix of partial rows
whose fan-out reaches the cap.
"""

from __future__ import annotations

from collections.abc import Mapping

import networkx as nx
import polars as pl

from streamdetect.relational.join_tree import build_join_tree, reduce_bottom_up


def materialise(relations: Mapping[str, pl.DataFrame], limit: int) -> pl.DataFrame:
    """At most ``limit`` rows of the natural join of ``relations`` (all of it when it is smaller)."""
    if any(frame.is_empty() for frame in relations.values()) or limit <= 0:
        columns: dict[str, pl.DataType] = {}
        for frame in relations.values():
            columns.update(frame.schema)
        return pl.DataFrame(schema=columns)
    plan = build_join_tree(relations)
    root = min(plan.relations)
    reduced = reduce_bottom_up(plan, root)
    partial = reduced[root].head(limit)
    for parent, child in nx.bfs_edges(plan.tree, root):
        on = plan.separator(child, parent)
        fan_out = reduced[child].group_by(on).len(name="\0fan")
        sizes = partial.join(fan_out, on=on, how="left", maintain_order="left").get_column("\0fan")
        # The shortest prefix whose fan-out reaches the cap: at most limit + one fan-out rows joined.
        keep = min(partial.height, int((sizes.cum_sum() < limit).sum()) + 1)
        partial = partial.head(keep).join(reduced[child], on=on).head(limit)
    return partial
