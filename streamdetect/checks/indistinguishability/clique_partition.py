"""A partition of a CSIND component into cliques, each of at least k rows where the heuristic finds one.

Finding a clique partition with every block of at least k is NP-hard (the paper cites Ji & Mitchell); this
is the greedy of a colouring of the complement graph (heaviest nodes first: each joins the first block it
is CSIND with throughout, or opens one) followed by a local repair of the blocks below k (merge one into
a block it forms a clique with, or take one row from a block that keeps k). Neither step lists pairs: a
block keeps the classes of its members' values and, per class, the image all its members share there
when they are all stable on it (:mod:`.csind`); a node joins a block iff its class is among those, its
image agrees with the block's at its class and at each class of the block, and it is stable on each. So
candidates come from an index on (class, image), never from a scan of every block.

Blocks count rows per node: rows of one node are interchangeable and may be split between blocks.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from streamdetect.checks.indistinguishability.csind import Node


@dataclass
class Block:
    """Rows per node, the classes of their values, and the images every member shares where all are
    stable (a subset of the true set after rows leave: tests against it stay sound)."""

    number: int
    counts: dict[int, int] = field(default_factory=dict)
    classes: set[int] = field(default_factory=set)
    agreed: dict[int, Hashable] = field(default_factory=dict)
    rows: int = 0
    merged: bool = False

    def admits(self, node: Node) -> bool:
        """Whether ``node`` is CSIND with every member."""
        own = node.cls
        if own not in self.agreed or self.agreed[own] != node.images[own]:
            return False
        return all(node.stable[c] and node.images[c] == self.agreed[c] for c in self.classes)

    def take(self, index: int, node: Node, count: int) -> None:
        """Add ``count`` rows of ``node`` (which :meth:`admits` it)."""
        if self.counts:
            self.agreed = {c: image for c, image in self.agreed.items() if node.stable[c] and node.images[c] == image}
        else:
            self.agreed = node.agreed()
        self.counts[index] = self.counts.get(index, 0) + count
        self.classes.add(node.cls)
        self.rows += count

    def forms_clique_with(self, other: Block) -> bool:
        """Whether the union of the two blocks is a clique."""
        return all(c in other.agreed and other.agreed[c] == self.agreed.get(c) for c in self.classes) and all(
            c in self.agreed and self.agreed[c] == other.agreed[c] for c in other.classes
        )


def partition(nodes: Sequence[Node], weights: Sequence[int], k: int) -> list[dict[int, int]]:
    """Blocks of one component, as rows per node index; ``nodes`` in a canonical order (ties of weight
    keep it), so the blocks depend on the nodes and weights only."""
    if len(nodes) == 1:
        return [{0: weights[0]}]
    blocks: list[Block] = []
    index: dict[tuple[int, Hashable], list[int]] = {}
    for i in sorted(range(len(nodes)), key=lambda i: (-weights[i], i)):
        node = nodes[i]
        target = next(
            (b for b in index.get((node.cls, node.images[node.cls]), ()) if blocks[b].admits(node)),
            None,
        )
        if target is None:
            block = Block(len(blocks))
            blocks.append(block)
            block.take(i, node, weights[i])
            for c, image in block.agreed.items():
                index.setdefault((c, image), []).append(block.number)
        else:
            blocks[target].take(i, node, weights[i])
    _Repair(nodes, blocks, index, k).run()
    return [block.counts for block in blocks if not block.merged and block.rows]


class _Repair:
    """Grow the blocks below k: merge one into a block it forms a clique with (the first in order), or
    move single rows into it from blocks that keep k. Each step removes a block or adds a row to a block
    below k without taking one below k, so it ends; passes repeat while one changes something."""

    def __init__(
        self, nodes: Sequence[Node], blocks: list[Block], index: dict[tuple[int, Hashable], list[int]], k: int
    ) -> None:
        self.nodes = nodes
        self.blocks = blocks
        self.index = index
        self.k = k
        #: Nodes by (class, image) where they are stable: the candidates to join a block.
        self.by_image: dict[tuple[int, Hashable], list[int]] = {}
        for i, node in enumerate(nodes):
            for c, image in node.agreed().items():
                self.by_image.setdefault((c, image), []).append(i)
        #: Blocks that hold (or held) rows of each node.
        self.holders: dict[int, list[int]] = {}
        for block in blocks:
            for i in block.counts:
                self.holders.setdefault(i, []).append(block.number)

    def run(self) -> None:
        """Passes over the blocks below k until one changes nothing."""
        improved = True
        while improved:
            improved = False
            for small in self.blocks:
                if small.merged or not small.rows or small.rows >= self.k:
                    continue
                improved = self._merge(small) or self._grow(small) or improved

    def _merge(self, small: Block) -> bool:
        anchor = min(small.classes)
        target = next(
            (
                self.blocks[b]
                for b in self.index.get((anchor, small.agreed[anchor]), ())
                if b != small.number
                and not self.blocks[b].merged
                and self.blocks[b].rows
                and small.forms_clique_with(self.blocks[b])
            ),
            None,
        )
        if target is None:
            return False
        for i, count in small.counts.items():
            target.take(i, self.nodes[i], count)
            self.holders[i].append(target.number)
        small.merged = True
        return True

    def _grow(self, small: Block) -> bool:
        grown = False
        while small.rows < self.k:
            move = self._donor(small)
            if move is None:
                break
            i, donor = move
            donor.counts[i] -= 1
            donor.rows -= 1
            if not donor.counts[i]:
                del donor.counts[i]
            if i not in small.counts:
                self.holders[i].append(small.number)
            small.take(i, self.nodes[i], 1)
            grown = True
        return grown

    def _donor(self, small: Block) -> tuple[int, Block] | None:
        """A node CSIND with every member of ``small`` and a block other than it holding a row of that
        node that keeps k rows without it, or None."""
        anchor = min(small.classes)
        for i in self.by_image.get((anchor, small.agreed[anchor]), ()):
            if not small.admits(self.nodes[i]):
                continue
            for b in self.holders.get(i, ()):
                donor = self.blocks[b]
                if donor is not small and not donor.merged and donor.counts.get(i) and donor.rows - 1 >= self.k:
                    return i, donor
        return None
