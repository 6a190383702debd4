"""k-RSIND: restricted symmetric indistinguishability (Yao, Wang, Wang & Jajodia, section 3.2).

Cliques of the CSIND graph (:mod:`.csind`) are RSIND sets w.r.t. their members' current values; a
partition of the public tuples into cliques of at least k members shows k-RSIND. Finding one is NP-hard,
so the partition is a heuristic (:mod:`.clique_partition`) and a block below k is a finding, ``exact``
false: it may come from the heuristic rather than the views. Two cases are exact: with one value class
(no selection mentioning P, or none that tells the values present apart) CSIND is an equivalence, its
classes are the maximal cliques and they are disjoint, so the partition is optimal; and when moreover
every view projects P, CSIND is RSIND (the paper's "necessary and sufficient"): a class below k is a
violation in fact, ``exact`` true.

Computation: rows are summed up by nodes (value class, images, stability); nodes are grouped into the
graph's connected components through the clique groups and union-find, never by pairs; each component
is partitioned on its own (blocks never cross components). Incremental over arriving table rows: a row
touches its node's component (or joins components through a new node), and only the components touched
are partitioned again; their findings are the update's delta. A withdrawal, or values that change the
value classes, rebuild the nodes from the rows (O(rows)). The heuristic runs on a canonical order (nodes
by weight, then by their first row's public values), so its blocks depend on the bag of rows only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import polars as pl

from streamdetect.checks.findings import Delta, RsindFinding, diff
from streamdetect.checks.indistinguishability.clique_partition import partition as clique_partition
from streamdetect.checks.indistinguishability.csind import (
    Node,
    ValueClasses,
    clique_groups,
    dependent_views,
    row_nodes,
    value_classes,
)
from streamdetect.checks.indistinguishability.sind import RowCache, SindState, publisher_settings, row_cache
from streamdetect.model.topology import Topology, ViewDefinition


@dataclass
class Partition:
    """One sensitive attribute's CSIND nodes over a state's first ``covered`` rows, their components
    (union-find) and each component's blocks and findings. Not serialized: rebuilt from the rows."""

    classes: ValueClasses
    covered: int = 0
    ids: dict[Node, int] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    #: Row positions per node, and per node its first row's canonical key.
    rows: list[list[int]] = field(default_factory=list)
    first: list[tuple[tuple[str, ...], str]] = field(default_factory=list)
    #: Per row, its private value as text: with the row's public values, its canonical key.
    texts: list[str] = field(default_factory=list)
    parent: list[int] = field(default_factory=list)
    #: A node of each clique group (:func:`~.csind.clique_groups`) met so far.
    groups: dict[Hashable, int] = field(default_factory=dict)
    #: Per component (its root), its nodes, its blocks (row positions) and the findings among them.
    members: dict[int, list[int]] = field(default_factory=dict)
    blocks: dict[int, list[list[int]]] = field(default_factory=dict)
    findings: dict[int, list[RsindFinding]] = field(default_factory=dict)
    #: How many components' findings have each finding id: two blocks of rows with the same public values
    #: give the same finding, and it is open while any of them does.
    counts: dict[str, int] = field(default_factory=dict)

    def find(self, node: int) -> int:
        """The root of ``node``'s component."""
        parent = self.parent
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    def add(self, node: Node) -> int:
        """A new node, alone in its component."""
        number = len(self.nodes)
        self.ids[node] = number
        self.nodes.append(node)
        self.rows.append([])
        self.first.append(((), ""))
        self.parent.append(number)
        self.members[number] = [number]
        return number

    def release(self, root: int, into: list[RsindFinding]) -> None:
        """Forget a component's blocks (it changes), its findings moved to ``into``."""
        self.blocks.pop(root, None)
        gone = self.findings.pop(root, ())
        for finding in gone:
            self.counts[finding.id] -= 1
        into.extend(gone)

    def keep(self, root: int, findings: list[RsindFinding]) -> None:
        """A component's findings, after it was partitioned again."""
        self.findings[root] = findings
        for finding in findings:
            self.counts[finding.id] = self.counts.get(finding.id, 0) + 1

    def net(self, old: list[RsindFinding], new: list[RsindFinding]) -> Delta[RsindFinding]:
        """What changed when components' findings ``old`` were replaced by ``new`` (:meth:`release`,
        :meth:`keep`): a finding raised when no other component had it, cleared when none has it now."""
        came = Counter(f.id for f in new)
        went = Counter(f.id for f in old)
        # Open before: held by the components left alone or by those released (count - came + went).
        raised = {f.id: f for f in new if self.counts[f.id] - came[f.id] + went[f.id] == 0}
        cleared = {f.id: f for f in old if not self.counts.get(f.id)}
        for key in went:
            if not self.counts.get(key):
                self.counts.pop(key, None)
        return Delta(tuple(raised.values()), tuple(cleared.values()))

    def union(self, a: int, b: int) -> None:
        """Join the components of two nodes (the larger one's root stays)."""
        a, b = self.find(a), self.find(b)
        if a == b:
            return
        if len(self.members[a]) < len(self.members[b]):
            a, b = b, a
        self.parent[b] = a
        self.members[a].extend(self.members.pop(b))

    def every_finding(self) -> list[RsindFinding]:
        """The findings of every component, each once (blocks of rows with the same public values give
        the same finding)."""
        return list({finding.id: finding for findings in self.findings.values() for finding in findings}.values())


@dataclass(frozen=True)
class RsindCheck:
    """k-RSIND over the views of a table; conservative (heuristic clique partition) unless exact."""

    views: tuple[ViewDefinition, ...]
    public: tuple[str, ...]
    sensitive: tuple[str, ...]
    k: int = 2
    #: The sensitive attributes whose partitions are kept and reported (empty: all; the rows keep every one).
    examined: tuple[str, ...] = ()

    @classmethod
    def from_topology(cls, topology: Topology, k: int | None = None) -> RsindCheck:
        """The check as configured; it needs the private table (``table.source``)."""
        public, threshold = publisher_settings(topology, "rsind", k)
        return cls(topology.views, public, topology.table.sensitive, threshold)

    @property
    def examining(self) -> tuple[str, ...]:
        """The sensitive attributes whose partitions it keeps and reports: ``examined``, else every one."""
        return self.examined or self.sensitive

    def initialize(self) -> SindState:
        """No rows seen (the same state as the SIND check: the table's rows)."""
        return SindState()

    def refusal(self, rows: pl.DataFrame | None) -> str | None:
        """RSIND takes any rows."""
        del rows
        return None

    def fold(self, state: SindState, table_rows: pl.DataFrame | None, retracted: pl.DataFrame | None) -> None:
        """Withdraw, then add rows; the partitions follow at the next :meth:`update` or :meth:`result`."""
        rows = state.folded(table_rows, retracted, [*self.public, *self.sensitive])
        if retracted is not None and retracted.height:
            state.cache = None  # rows left from the middle: positions moved
            state.partitions.clear()
        state.rows = rows

    def update(
        self, state: SindState, table_rows: pl.DataFrame | None, retracted: pl.DataFrame | None = None
    ) -> Delta[RsindFinding]:
        """Withdraw rows of the private table, add new ones; the findings raised and cleared. Arrivals
        partition again only the components they touch."""
        withdrawn = retracted is not None and retracted.height > 0
        before: list[RsindFinding] = []
        if withdrawn:
            before = self.result(state)
        else:
            for sensitive in self.examining:
                self._partition(state, sensitive)  # the rows before, when not cached
        self.fold(state, table_rows, retracted)
        if withdrawn:
            return diff(before, self.result(state))
        raised: list[RsindFinding] = []
        cleared: list[RsindFinding] = []
        for sensitive in self.examining:
            delta = self._advance(state, sensitive)
            raised.extend(delta.raised)
            cleared.extend(delta.cleared)
        return Delta(tuple(raised), tuple(cleared))

    def result(self, state: SindState) -> list[RsindFinding]:
        """Blocks of the RSIND partition smaller than k, per sensitive attribute."""
        findings = []
        for sensitive in self.examining:
            part = self._partition(state, sensitive)
            if part is not None:
                findings.extend(part.every_finding())
        return sorted(findings, key=lambda f: (f.sensitive_attribute, [str(v) for _, v in f.members[0]]))

    def partition(self, state: SindState, sensitive: str) -> list[list[int]]:
        """Blocks of row positions of the state, each a clique of the CSIND graph, sorted."""
        part = self._partition(state, sensitive)
        if part is None:
            return []
        return sorted(sorted(block) for blocks in part.blocks.values() for block in blocks)

    def exact_for(self, sensitive: str, classes: ValueClasses) -> bool:
        """True when the partition is optimal and CSIND is RSIND (module docstring)."""
        return classes.count == 1 and all(sensitive in view.attributes for view in self.views)

    def _partition(self, state: SindState, sensitive: str) -> Partition | None:
        """The state's partition for ``sensitive`` over all its rows (built or extended as needed)."""
        if state.rows is None or state.rows.is_empty():
            state.partitions.pop(sensitive, None)
            return None
        part = state.partitions.get(sensitive)
        if part is None or part.covered != state.rows.height:
            self._advance(state, sensitive)
        result: Partition = state.partitions[sensitive]
        return result

    def _advance(self, state: SindState, sensitive: str) -> Delta[RsindFinding]:
        """Bring the partition up to the state's rows: extend it by the rows that arrived, or rebuild it
        (classes changed, rows left); the findings raised and cleared."""
        rows = state.rows
        part = state.partitions.get(sensitive)
        if rows is None or rows.is_empty():
            state.partitions.pop(sensitive, None)
            return diff(part.every_finding() if part is not None else [], [])
        classes, kept = self._classes(rows, sensitive, part)
        if part is None or not kept or part.covered > rows.height:
            before = part.every_finding() if part is not None else []
            part = state.partitions[sensitive] = Partition(classes)
            _, after = self._extend(state, sensitive, part)
            return diff(before, after)
        part.classes = classes
        old, new = self._extend(state, sensitive, part)
        delta: Delta[RsindFinding] = part.net(old, new)
        return delta

    def _classes(self, rows: pl.DataFrame, sensitive: str, part: Partition | None) -> tuple[ValueClasses, bool]:
        """The value classes over ``rows``, and whether they are ``part``'s (then numbered as its): when
        they changed (a new class, or values of one class parted) the nodes are rebuilt."""
        if part is not None and not dependent_views(self.views, sensitive):
            return part.classes, True  # one class, whatever the values
        fresh = value_classes(self.views, rows, sensitive)
        if part is None or len(fresh.representatives) != len(part.classes.representatives):
            return fresh, False
        numbering: dict[int, int] = {}
        for value, number in part.classes.of.items():
            if numbering.setdefault(fresh.of[value], number) != number:
                return fresh, False
        return ValueClasses({v: numbering[n] for v, n in fresh.of.items()}, part.classes.representatives), True

    def _extend(
        self, state: SindState, sensitive: str, part: Partition
    ) -> tuple[list[RsindFinding], list[RsindFinding]]:
        """Add the rows after ``part.covered``; partition the components they touch again. The findings of
        those components before and after."""
        assert state.rows is not None
        rows = state.rows
        start = part.covered
        fresh = rows.slice(start)
        cache = row_cache(state, self.public)
        part.texts.extend(str(value) for value in fresh.get_column(sensitive).to_list())
        old: list[RsindFinding] = []
        touched: set[int] = set()
        created: list[int] = []
        for offset, node in enumerate(row_nodes(fresh, self.views, sensitive, part.classes)):
            position = start + offset
            number = part.ids.get(node)
            if number is None:
                number = part.add(node)
                created.append(number)
            elif number not in touched:
                part.release(part.find(number), old)
            touched.add(number)
            part.rows[number].append(position)
            key = (cache.keys[position], part.texts[position])
            if len(part.rows[number]) == 1 or key < part.first[number]:
                part.first[number] = key
        for number in created:
            for group in clique_groups(part.nodes[number]):
                other = part.groups.setdefault(group, number)
                if other != number:
                    part.release(part.find(other), old)
                    part.release(part.find(number), old)
                    part.union(number, other)
        part.covered = rows.height
        new: list[RsindFinding] = []
        exact = self.exact_for(sensitive, part.classes)
        for root in {part.find(number) for number in touched}:
            blocks = self._blocks(part, root, cache)
            part.blocks[root] = blocks
            findings = [self._finding(sensitive, block, cache, exact) for block in blocks if len(block) < self.k]
            part.keep(root, findings)
            new.extend(findings)
        return old, new

    def _blocks(self, part: Partition, root: int, cache: RowCache) -> list[list[int]]:
        """A component's blocks as row positions, each in the order of its members' public values."""
        members = part.members[root]
        if len(members) == 1:
            return [sorted(part.rows[members[0]], key=cache.keys.__getitem__)]
        ordered = sorted(members, key=part.first.__getitem__)
        counts = clique_partition(
            [part.nodes[number] for number in ordered], [len(part.rows[number]) for number in ordered], self.k
        )
        # Each node's rows in canonical order, handed out to the blocks that count them.
        remaining: dict[int, list[int]] = {}
        for index, number in enumerate(ordered):
            remaining[index] = sorted(part.rows[number], key=lambda row: (cache.keys[row], part.texts[row]))
        blocks = []
        for block in counts:
            taken: list[int] = []
            for index, count in block.items():
                taken.extend(remaining[index][:count])
                remaining[index] = remaining[index][count:]
            blocks.append(sorted(taken, key=cache.keys.__getitem__))
        return blocks

    def _finding(self, sensitive: str, block: Sequence[int], cache: RowCache, exact: bool) -> RsindFinding:
        members = tuple(cache.members[row] for row in block)
        if exact:
            reason = (
                f"class of {len(block)} public tuple(s) that can swap their values, fewer than k = {self.k} "
                "(no RSIND set holds more)"
            )
        else:
            reason = f"block of {len(block)} public tuple(s) in the RSIND partition found, fewer than k = {self.k}"
        return RsindFinding(
            k=self.k,
            sensitive_attribute=sensitive,
            members=members,
            views=tuple(sorted(view.name for view in self.views)),
            reason=reason,
            exact=exact,
            members_text="[" + ",".join(cache.texts[row] for row in block) + "]",
        )
