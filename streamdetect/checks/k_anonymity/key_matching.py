"""Exact k-anonymity, identifier the key, two views with the same selection (Yao, Wang & Jajodia 2005,
section 6.3.2): complete bipartite matchings.

v1 holds ID, v2 holds P, both select with the same condition C. A *link* joins a PF of v1 and a PF of
v2 when they agree on their common attributes and C can hold for the tuple they make (section 5,
disregarding the FD). Since ID is the key and both views select the same tuples, every instance maps
each PF of v1 to exactly one PF of v2, covering all of v2: a function m from v1's PFs onto v2's
along links. A link e = (p1, p2) occurs in some such m iff the bipartite graph without p1 and p2 has
a matching that covers every other PF of v2 (each remaining v1 PF then takes any link). The values
an identifier can take are the P values of the feasible links of its PF: fewer than k is a violation.
Cost: one Hopcroft-Karp matching (networkx) per link, O(L · L · sqrt(n)); recomputed per batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import networkx as nx
import polars as pl

from streamdetect.checks.findings import AssociationCoverFinding
from streamdetect.checks.k_anonymity.selection_covers import satisfiable
from streamdetect.model.topology import FunctionalDependency, ViewDefinition


def matching_subcase(
    views: Sequence[ViewDefinition],
    dependencies: Sequence[FunctionalDependency],
    attributes: Sequence[str],
    identifier: str,
    sensitive: str,
) -> tuple[ViewDefinition, ViewDefinition] | None:
    """(v1, v2) when section 6.3.2 applies: two views, one selection, ID the key; else None."""
    if len(views) != 2 or views[0].where is None or views[0].where != views[1].where:
        return None
    if any(fd.lhs != (identifier,) for fd in dependencies) or not dependencies:
        return None
    if not set(attributes) - {identifier} <= {a for fd in dependencies for a in fd.rhs}:
        return None
    holders = [v for v in views if identifier in v.attributes]
    others = [v for v in views if sensitive in v.attributes and identifier not in v.attributes]
    if len(holders) != 1 or len(others) != 1 or sensitive in holders[0].attributes:
        return None
    return holders[0], others[0]


@dataclass(frozen=True)
class KeyMatchingCoverCheck:
    """Section 6.3.2 for one (ID, P) pair: feasible links by complete matchings."""

    first: ViewDefinition
    second: ViewDefinition
    identifier: str
    sensitive: str
    k: int = 2

    def run(
        self, frames: Mapping[str, pl.DataFrame], table: pl.DataFrame | None = None
    ) -> list[AssociationCoverFinding]:
        """Covers below k (``table`` unused)."""
        condition = self.first.where
        assert condition is not None
        left = frames[self.first.name].select(self.first.attributes).unique().rows(named=True)
        right = frames[self.second.name].select(self.second.attributes).unique().rows(named=True)
        shared = set(self.first.attributes) & set(self.second.attributes)
        graph = nx.Graph()
        graph.add_nodes_from((("L", i) for i in range(len(left))), bipartite=0)
        graph.add_nodes_from((("R", j) for j in range(len(right))), bipartite=1)
        for i, p1 in enumerate(left):
            for j, p2 in enumerate(right):
                if all(p1[a] == p2[a] for a in shared) and satisfiable({**p1, **p2}, [condition]):
                    graph.add_edge(("L", i), ("R", j))
        possible: dict[int, set[object]] = {i: set() for i in range(len(left))}
        for (side_a, a), (_, b) in list(graph.edges):
            i, j = (a, b) if side_a == "L" else (b, a)
            rest = graph.copy()
            rest.remove_nodes_from([("L", i), ("R", j)])
            tops = [node for node in rest if node[0] == "L"]
            matching = nx.bipartite.hopcroft_karp_matching(rest, top_nodes=tops) if rest.number_of_edges() else {}
            covered = sum(1 for node in rest if node[0] == "R" and node in matching)
            if covered == len(right) - 1:
                possible[i].add(right[j][self.sensitive])
        findings = []
        for i, values in possible.items():
            if values and len(values) < self.k:
                findings.append(
                    AssociationCoverFinding(
                        k=self.k,
                        identifier_attribute=self.identifier,
                        identifier_value=left[i][self.identifier],
                        sensitive_attribute=self.sensitive,
                        sensitive_values=tuple(sorted(values, key=str)),  # type: ignore[arg-type]
                        views=tuple(sorted((self.first.name, self.second.name))),
                    )
                )
        return sorted(findings, key=lambda f: str(f.identifier_value))
