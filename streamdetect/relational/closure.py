"""The view-join graph and its leveled closure (Dou & Coulondre 2012, section 3.2, Algorithm 1).

Views are nodes; two views are adjacent when they share an attribute name, so that their natural join
links rows. A *channel* is a set of views that is connected in this graph; its joined view is their
natural join. Level n holds the channels of n views.

Reading of Algorithm 1: the paper joins pairs of level-i views to build level i+1 and stops when no
join is non-empty. Joining two connected view sets that overlap or touch gives a connected view set,
and every connected set of n views is reached that way, so the closure is exactly the connected
induced subgraphs of the view graph, enumerated by size. Channels whose joined view is empty are kept
here (the paper drops them); they raise no finding, and supersets of an empty channel are empty too.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import networkx as nx

from streamdetect.model.topology import ViewDefinition


@dataclass(frozen=True, order=True)
class Channel:
    """A connected set of views; ``views`` are sorted names, ``attributes`` the union schema."""

    views: tuple[str, ...]
    attributes: tuple[str, ...]

    @property
    def level(self) -> int:
        """Number of views joined."""
        return len(self.views)

    @property
    def label(self) -> str:
        """``{v1, v2}``, for people."""
        return "{" + ", ".join(self.views) + "}"


def view_graph(views: Sequence[ViewDefinition]) -> nx.Graph:
    """The graph whose nodes are view names, linked when two views share attributes.

    Each edge carries ``shared``: the sorted shared attribute names. O(n^2 a) for n views of a attributes.
    """
    graph = nx.Graph()
    for view in views:
        graph.add_node(view.name, attributes=view.attributes)
    for i, left in enumerate(views):
        for right in views[i + 1 :]:
            shared = sorted(set(left.attributes) & set(right.attributes))
            if shared:
                graph.add_edge(left.name, right.name, shared=tuple(shared))
    return graph


def _schema(views: Iterable[ViewDefinition], names: frozenset[str], order: Sequence[str]) -> tuple[str, ...]:
    present = {attribute for view in views if view.name in names for attribute in view.attributes}
    return tuple(attribute for attribute in order if attribute in present)


def grow(graph: nx.Graph, level: Iterable[frozenset[str]]) -> set[frozenset[str]]:
    """The connected view sets one view larger than those of ``level``: each grown by a neighbour."""
    grown: set[frozenset[str]] = set()
    for members in level:
        frontier = {n for member in members for n in graph.neighbors(member)} - members
        grown.update(members | {neighbour} for neighbour in frontier)
    return grown


def as_channels(
    views: Sequence[ViewDefinition], level: Iterable[frozenset[str]], attribute_order: Sequence[str]
) -> list[Channel]:
    """The view sets of one level as channels, sorted (by their view names)."""
    return sorted(Channel(tuple(sorted(s)), _schema(views, s, attribute_order)) for s in level)


def iter_levels(
    views: Sequence[ViewDefinition],
    attribute_order: Sequence[str],
    max_level: int | None = None,
    holding: frozenset[str] = frozenset(),
) -> Iterator[tuple[list[Channel], set[frozenset[str]]]]:
    """The leveled closure, one level at a time: the channels of n views (sorted) with the view sets the
    next level grows from, for n = 1, 2, ... up to ``max_level``. Lazy, so a caller may stop where the
    levels grow too many. ``holding``: only the channels holding these views (grown from them one
    neighbour at a time; every connected superset arises so), the levels below their number empty."""
    graph = view_graph(views)
    limit = len(views) if max_level is None else min(max_level, len(views))
    done = len(holding) - 1 if holding else 0
    level: set[frozenset[str]] = {holding} if holding else {frozenset([view.name]) for view in views}
    for _ in range(min(done, limit)):
        yield [], set()
    while level and done < limit:
        connected = {members for members in level if nx.is_connected(graph.subgraph(members))} if holding else level
        yield as_channels(views, connected, attribute_order), level
        done += 1
        level = grow(graph, level)


def channels_by_level(
    views: Sequence[ViewDefinition],
    attribute_order: Sequence[str],
    max_level: int | None = None,
) -> list[list[Channel]]:
    """The leveled closure: ``result[n - 1]`` lists the channels of n views, sorted.

    Enumerates connected induced subgraphs by growing each level-n set by one neighbouring view;
    the work is proportional to the number of channels times the graph's degree, which is exponential
    in the number of views in the worst case (a clique of n views has 2^n - 1 channels): bound it with
    ``max_level``, or take the levels one at a time (:func:`iter_levels`).
    """
    return [channels for channels, _ in iter_levels(views, attribute_order, max_level)]


def components(views: Sequence[ViewDefinition], attribute_order: Sequence[str]) -> list[Channel]:
    """The connected components of the view graph as channels: the largest channel each view lies in."""
    graph = view_graph(views)
    return as_channels(views, (frozenset(part) for part in nx.connected_components(graph)), attribute_order)
