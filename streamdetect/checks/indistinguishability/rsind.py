"""k-RSIND: restricted symmetric indistinguishability (Yao, Wang, Wang & Jajodia, section 3.2).

Two public tuples b1, b2 with current private values p1, p2 are CSIND when, for every view q,
either q projects P and q((b1, p1)) = q((b2, p1)) and q((b1, p2)) = q((b2, p2)), or q does not and
q((b1, p1)) = q((b1, p2)) and q((b2, p1)) = q((b2, p2)); q(t) is t's projection when t satisfies the
selection, nothing otherwise. Cliques of the CSIND graph are RSIND sets; a partition into cliques of
at least k members shows k-RSIND. Finding one is NP-hard (a clique partition with every block of size
at least k), so a heuristic is used and findings are ``exact`` false: a block below k may come from
the heuristic rather than the views.

Computation: a row's *type* is its current P value and the image q((b, p)) of every view for every
current value p of the table; rows of one type are pairwise CSIND, and CSIND between two rows depends
only on their types, so the graph is built over types (networkx), and the clique partition is a
greedy colouring of its complement (largest types first), blocks weighted by their rows. Cost:
O(rows · values · views) for the images plus O(types²) pairs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx
import polars as pl

from streamdetect.checks.findings import Delta, RsindFinding, diff
from streamdetect.checks.indistinguishability.sind import SindState, publisher_settings
from streamdetect.errors import UnsupportedCase
from streamdetect.model.predicates import to_polars
from streamdetect.model.topology import Topology, ViewDefinition

TYPE = "\0type"
#: The CSIND graph is built over pairs of row types: beyond this many, refuse rather than run for hours.
MAX_TYPES = 5_000


@dataclass(frozen=True)
class RsindCheck:
    """k-RSIND over the views of a table; conservative (heuristic clique partition)."""

    views: tuple[ViewDefinition, ...]
    public: tuple[str, ...]
    sensitive: tuple[str, ...]
    k: int = 2

    @classmethod
    def from_topology(cls, topology: Topology, k: int | None = None) -> RsindCheck:
        """The check as configured; it needs the private table (``table.source``)."""
        public, threshold = publisher_settings(topology, "rsind", k)
        return cls(topology.views, public, topology.table.sensitive, threshold)

    def initialize(self) -> SindState:
        """No rows seen (the same state as the SIND check: the table's rows)."""
        return SindState()

    def update(
        self, state: SindState, table_rows: pl.DataFrame | None, retracted: pl.DataFrame | None = None
    ) -> Delta[RsindFinding]:
        """Withdraw rows of the private table, add new ones; recompute the partition (not maintainable
        incrementally: a row can change the best clique partition anywhere)."""
        before = self.result(state) if state.rows is not None else []
        self.fold(state, table_rows, retracted)
        return diff(before, self.result(state))

    def refusal(self, rows: pl.DataFrame | None) -> str | None:
        """RSIND takes any rows."""
        del rows
        return None

    def fold(self, state: SindState, table_rows: pl.DataFrame | None, retracted: pl.DataFrame | None) -> None:
        """Withdraw, then add rows; nothing is recomputed."""
        state.rows = state.folded(table_rows, retracted, [*self.public, *self.sensitive])

    def _images(self, rows: pl.DataFrame, sensitive: str, values: Sequence[Any]) -> pl.DataFrame:
        """Per row: its type key, from its current value and every view's image for every value."""
        images = []
        always = pl.repeat(True, pl.len())
        for view in self.views:
            for value in values:
                where = view.where
                selected = (
                    always if where is None else to_polars(where, rows.schema, {sensitive: value}).fill_null(False)
                )
                literal = pl.repeat(value, pl.len(), dtype=rows.schema[sensitive])
                shown = [literal if a == sensitive else pl.col(a) for a in view.attributes]
                images.append(pl.when(selected).then(pl.struct(shown)).alias(f"{view.name}\0{value}"))
        return rows.with_row_index("\0row").with_columns(images)

    def partition(self, state: SindState, sensitive: str) -> list[list[int]]:
        """Blocks of row positions, each a clique of the CSIND graph (heuristic partition)."""
        if state.rows is None or state.rows.is_empty():
            return []
        # The heuristic runs on the rows in a canonical order (sorted), so that its blocks depend on the
        # bag of rows only, not on the order they arrived or were withdrawn in; positions map back after.
        canonical = state.rows.with_row_index("\0original").sort(
            [*self.public, *self.sensitive], nulls_last=True, maintain_order=True
        )
        original = canonical.get_column("\0original").to_list()
        rows = canonical.drop("\0original")
        values = rows.get_column(sensitive).drop_nulls().unique().sort().to_list()
        imaged = self._images(rows, sensitive, values)
        image_columns = [c for c in imaged.columns if "\0" in c and c != "\0row"]
        # Types in order of first row: the heuristic partition must not depend on hash order, or one state
        # would give different findings (and ids) from one call to the next.
        types = imaged.group_by([sensitive, *image_columns], maintain_order=True).agg(pl.col("\0row"))
        if types.height > MAX_TYPES:
            raise UnsupportedCase(
                f"rsind: {types.height:,} distinct row types for {sensitive!r}; the CSIND graph is built pairwise "
                f"(quadratic) and this version stops at {MAX_TYPES:,} types"
            )
        keys = types.select([sensitive, *image_columns]).to_dicts()
        members = types.get_column("\0row").to_list()
        graph = nx.Graph()
        graph.add_nodes_from(range(len(keys)))
        for i in range(len(keys)):
            for j in range(i + 1, len(keys)):
                if self._csind(keys[i], keys[j], sensitive):
                    graph.add_edge(i, j)
        weight = {i: len(members[i]) for i in range(len(keys))}
        blocks = _repair(graph, _clique_partition(graph, weight), self.k)
        # Hand out each type's rows to the blocks that count them.
        remaining: dict[int, list[int]] = {node: sorted(positions) for node, positions in enumerate(members)}
        partition: list[list[int]] = []
        for block in blocks:
            taken: list[int] = []
            for node, count in block.items():
                taken.extend(remaining[node][:count])
                remaining[node] = remaining[node][count:]
            partition.append(sorted(original[position] for position in taken))
        return sorted(partition)

    def _csind(self, left: dict[str, Any], right: dict[str, Any], sensitive: str) -> bool:
        p1, p2 = left[sensitive], right[sensitive]
        for view in self.views:
            if sensitive in view.attributes:
                same = left[f"{view.name}\0{p1}"] == right[f"{view.name}\0{p1}"] and (
                    left[f"{view.name}\0{p2}"] == right[f"{view.name}\0{p2}"]
                )
            else:
                same = left[f"{view.name}\0{p1}"] == left[f"{view.name}\0{p2}"] and (
                    right[f"{view.name}\0{p1}"] == right[f"{view.name}\0{p2}"]
                )
            if not same:
                return False
        return True

    def result(self, state: SindState) -> list[RsindFinding]:
        """Blocks of the heuristic RSIND partition smaller than k, per sensitive attribute."""
        if state.rows is None or state.rows.is_empty():
            return []
        findings = []
        public = state.rows.select(self.public)
        for sensitive in self.sensitive:
            for block in self.partition(state, sensitive):
                if len(block) >= self.k:
                    continue
                members = public[block].sort(self.public).to_dicts()
                findings.append(
                    RsindFinding(
                        k=self.k,
                        sensitive_attribute=sensitive,
                        members=tuple(tuple(member.items()) for member in members),
                        views=tuple(sorted(view.name for view in self.views)),
                        reason=f"block of {len(block)} public tuple(s) in the RSIND partition found, fewer than k",
                        exact=False,
                    )
                )
        return sorted(findings, key=lambda f: (f.sensitive_attribute, [str(v) for _, v in f.members[0]]))


def _clique_partition(graph: nx.Graph, weight: dict[int, int]) -> list[dict[int, int]]:
    """A colouring of the complement is a partition into cliques; heavier types first.

    Blocks count rows per type: the rows of one type are interchangeable and may be split.
    """
    order = sorted(graph.nodes, key=lambda node: (-weight[node], node))
    colours = nx.greedy_color(nx.complement(graph), strategy=lambda _graph, _colours: iter(order))
    blocks: dict[int, dict[int, int]] = {}
    for node, colour in colours.items():
        blocks.setdefault(colour, {})[node] = weight[node]
    return list(blocks.values())


def _repair(graph: nx.Graph, blocks: list[dict[int, int]], k: int) -> list[dict[int, int]]:
    """Local repair towards blocks of at least k rows: merge a small block into a block it forms a
    clique with, or move into it one row of a type from a block that keeps k rows. Every move grows a
    block below k without shrinking another below k, so it ends."""

    def joins(node: int, block: dict[int, int]) -> bool:
        return all(graph.has_edge(node, other) for other, count in block.items() if count and other != node)

    improved = True
    while improved:
        improved = False
        for small in [b for b in blocks if sum(b.values()) < k]:
            target = next((b for b in blocks if b is not small and all(joins(n, b) for n in small)), None)
            if target is not None:
                for node, count in small.items():
                    target[node] = target.get(node, 0) + count
                blocks.remove(small)
                improved = True
                break
            for donor in blocks:
                if donor is small or sum(donor.values()) - 1 < k:
                    continue
                moving = next((n for n, count in donor.items() if count and joins(n, small)), None)
                if moving is not None:
                    donor[moving] -= 1
                    small[moving] = small.get(moving, 0) + 1
                    improved = True
                    break
            if improved:
                break
    return [block for block in blocks if sum(block.values())]
