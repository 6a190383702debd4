"""Capped linked values through a natural join, without materialising it.

For relations R_1..R_n, a *source* attribute E and a *target* attribute T, compute for every value e
of E in the join J = R_1 ⋈ ... ⋈ R_n the set L(e) = {t : (e, t) ∈ π_{E,T} J}, capped at k values:
when |L(e)| < k the set is exact, otherwise k of its values stand for "k or more". This is all the
count-equals-one query of Dou & Coulondre (section 3.4) and partial disclosure need.

Method (design notes, section 2): build a join tree (cycles broken by the cheapest bags, see
:mod:`streamdetect.relational.join_tree`), root it at a node holding E, reduce every node by semi-joins
with its subtrees bottom-up (Yannakakis), then pass capped target sets up the path from the highest
node holding T to the root. After the bottom-up reduction every root tuple extends to a full join tuple
and the subtrees of a node are independent given the node's tuple, so the capped union is exact.
Cost: O(sum |R_i| * k) plus the size of any bag materialised for a cycle.
"""

from __future__ import annotations

from collections.abc import Mapping

import networkx as nx
import polars as pl

from streamdetect.relational.join_tree import SizeCache, build_join_tree, reduce_bottom_up


def cap_per_key(frame: pl.DataFrame, keys: list[str], k: int) -> pl.DataFrame:
    """Distinct rows of ``frame``, at most ``k`` per value of ``keys``. O(n)."""
    return frame.unique().group_by(keys, maintain_order=False).head(k)


def linked_values(
    relations: Mapping[str, pl.DataFrame],
    source: str,
    target: str,
    k: int,
    size_cache: SizeCache | None = None,
) -> pl.DataFrame:
    """Frame ``[source, target]``: for each source value in the join, up to ``k`` linked target values.

    ``relations`` must be sets (distinct rows) without nulls, over a connected schema that contains
    ``source`` and ``target``. Exact for "fewer than k or not", and the set itself when fewer than k.
    """
    if any(frame.is_empty() for frame in relations.values()):
        return pl.DataFrame(schema={source: _dtype(relations, source), target: _dtype(relations, target)})
    plan = build_join_tree(relations, size_cache)
    root = min(name for name, frame in plan.relations.items() if source in frame.columns)
    if target in plan.relations[root].columns:
        holder = root
    else:
        distance = nx.single_source_shortest_path_length(plan.tree, root)
        holder = min(
            (name for name, frame in plan.relations.items() if target in frame.columns),
            key=lambda name: (distance[name], name),
        )
    reduced = reduce_bottom_up(plan, root)
    path = nx.shortest_path(plan.tree, holder, root)
    message: pl.DataFrame | None = None
    for position, node in enumerate(path):
        frame = reduced[node]
        if message is not None:
            frame = frame.join(message, on=plan.separator(path[position - 1], node))
        keys = [source] if node == root else plan.separator(node, path[position + 1])
        message = cap_per_key(frame.select([*keys, target]), keys, k)
    assert message is not None
    return message


def _dtype(relations: Mapping[str, pl.DataFrame], column: str) -> pl.DataType:
    for frame in relations.values():
        if column in frame.columns:
            return frame.schema[column]
    return pl.Null()
