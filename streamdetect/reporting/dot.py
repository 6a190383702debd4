"""The view-join graph as Graphviz DOT: views are nodes, an edge joins two views that share attributes
(labelled with them), and the views and joins of the findings' channels are drawn in red.

Render it with Graphviz: ``streamdetect closure T.yaml --format dot | dot -Tsvg > views.svg``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import combinations

from streamdetect.model.topology import ViewDefinition


def _quote(text: str) -> str:
    # DOT strings: a backslash and a quote are escaped; a line break is the escape \n (centred line).
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def view_graph_dot(name: str, views: Sequence[ViewDefinition], highlighted: Iterable[tuple[str, ...]] = ()) -> str:
    """DOT text of the views' join graph; ``highlighted`` channels (tuples of view names) drawn in red.

    O(views^2) edges at most.
    """
    channels = [set(channel) for channel in highlighted]
    hot_views = set().union(*channels) if channels else set()
    lines = [f"graph {_quote(name)} {{", "  node [shape=box];"]
    for view in views:
        label = f"{view.name}\n({', '.join(view.attributes)})"
        if view.where_text:
            label += f"\nwhere {view.where_text}"
        style = ", color=red, penwidth=2" if view.name in hot_views else ""
        lines.append(f"  {_quote(view.name)} [label={_quote(label)}{style}];")
    for left, right in combinations(views, 2):
        shared = [a for a in left.attributes if a in right.attributes]
        if not shared:
            continue
        hot = any(left.name in channel and right.name in channel for channel in channels)
        style = ", color=red, penwidth=2" if hot else ""
        lines.append(f"  {_quote(left.name)} -- {_quote(right.name)} [label={_quote(', '.join(shared))}{style}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
