"""Join trees for natural joins of relations, breaking cycles by materialising the cheapest bags.

A natural join of relations (hyperedges over attribute names) has a join tree iff its hypergraph is
alpha-acyclic (Beeri, Fagin, Maier, Yannakakis 1983); GYO ear removal tests that and leaves the cyclic
core. While a core remains, the two core relations that share attributes and whose join is smallest
(counted exactly from per-key counts, never by joining) are replaced by their join: a bag of a
generalised hypertree decomposition. The result is the same natural join over an acyclic schema; a
maximum-weight spanning tree of the intersection graph (weight: number of shared attributes) is then
a join tree. This is the plan the design notes sketch for cyclic channels (e.g. BP's v1, v4, v6).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import networkx as nx
import polars as pl


@dataclass(frozen=True)
class JoinTree:
    """Relations (by node name) over an acyclic schema, and a join tree over them.

    ``tree`` is a networkx tree whose nodes are keys of ``relations``; ``merged`` records which input
    relations each node joins (one for an original relation, several for a materialised bag).
    """

    relations: Mapping[str, pl.DataFrame]
    tree: nx.Graph
    merged: Mapping[str, tuple[str, ...]]

    def separator(self, left: str, right: str) -> list[str]:
        """Attributes shared by two nodes, in ``left``'s column order."""
        other = set(self.relations[right].columns)
        return [column for column in self.relations[left].columns if column in other]


def _cyclic_core(schemas: Mapping[str, frozenset[str]]) -> list[str]:
    """GYO reduction: repeatedly remove ears; what remains (if more than one node) is cyclic."""
    remaining = dict(schemas)
    removed = True
    while removed and len(remaining) > 1:
        removed = False
        for node, attributes in remaining.items():
            others = [other for other in remaining if other != node]
            elsewhere = frozenset().union(*(remaining[other] for other in others))
            shared = attributes & elsewhere
            if any(shared <= remaining[other] for other in others):
                del remaining[node]
                removed = True
                break
    return sorted(remaining) if len(remaining) > 1 else []


def join_size(left: pl.DataFrame, right: pl.DataFrame) -> int:
    """Exact row count of ``left ⋈ right`` from per-key counts, in time linear in the inputs."""
    on = [column for column in left.columns if column in right.columns]
    if not on:
        return left.height * right.height
    counts_left = left.group_by(on).len(name="_left")
    counts_right = right.group_by(on).len(name="_right")
    joined = counts_left.join(counts_right, on=on)
    total = joined.select((pl.col("_left").cast(pl.Int64) * pl.col("_right").cast(pl.Int64)).sum()).item()
    return int(total or 0)


def build_join_tree(relations: Mapping[str, pl.DataFrame]) -> JoinTree:
    """Make the schema acyclic by merging the cheapest cyclic pairs, then return a join tree.

    Exact: the natural join of the result equals that of the input. Cost: GYO is polynomial in the
    number of relations; each merge costs its join's size, chosen smallest among the core's pairs.
    The input relations must form a connected schema.
    """
    nodes: dict[str, pl.DataFrame] = dict(relations)
    merged: dict[str, tuple[str, ...]] = {name: (name,) for name in nodes}
    while True:
        core = _cyclic_core({name: frozenset(frame.columns) for name, frame in nodes.items()})
        if not core:
            break
        best: tuple[int, str, str] | None = None
        for i, left in enumerate(core):
            for right in core[i + 1 :]:
                if set(nodes[left].columns) & set(nodes[right].columns):
                    size = join_size(nodes[left], nodes[right])
                    if best is None or size < best[0]:
                        best = (size, left, right)
        assert best is not None, "a cyclic core always has two relations that share attributes"
        _, left, right = best
        on = [column for column in nodes[left].columns if column in nodes[right].columns]
        bag = nodes.pop(left).join(nodes.pop(right), on=on)
        name = f"{left}+{right}"
        nodes[name] = bag
        merged[name] = merged.pop(left) + merged.pop(right)
    graph = nx.Graph()
    graph.add_nodes_from(nodes)
    names = sorted(nodes)
    for i, left in enumerate(names):
        for right in names[i + 1 :]:
            weight = len(set(nodes[left].columns) & set(nodes[right].columns))
            if weight:
                graph.add_edge(left, right, weight=weight)
    tree = nx.maximum_spanning_tree(graph) if graph.number_of_edges() else graph
    if not nx.is_connected(tree):
        raise ValueError("the relations do not form a connected schema")
    return JoinTree(nodes, tree, merged)


def reduce_bottom_up(plan: JoinTree, root: str) -> dict[str, pl.DataFrame]:
    """Yannakakis' upward pass: each node semi-joined with its reduced subtrees, leaves first.

    Afterwards every tuple of a node extends to a join of its whole subtree; at the root, to a full
    join tuple. O(sum of relation sizes) with hash semi-joins.
    """
    reduced: dict[str, pl.DataFrame] = {}
    order = list(nx.dfs_postorder_nodes(plan.tree, root))
    parents = dict(nx.bfs_predecessors(plan.tree, root))
    for node in order:
        frame = plan.relations[node]
        for child in plan.tree.neighbors(node):
            if parents.get(child) == node:
                frame = frame.join(reduced[child], on=plan.separator(node, child), how="semi")
        reduced[node] = frame
    return reduced
