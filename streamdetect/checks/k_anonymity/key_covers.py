"""Exact k-anonymity when the identifier is the key and one join path links it to P (Yao, Wang &
Jajodia 2005, section 6.3.1).

When ID is the table's key and every FD has ID alone on its left, each identifier value takes exactly
one P value in every instance. With projection-only views whose graph (views linked by common
attributes) has exactly one join path from the view holding ID to the view holding P, every
association in the natural join along that path occurs in some instance (Proposition 8), so the
values an identifier can take are exactly those the path's join links it to: a violation is an
identifier linked to fewer than k of them, and the cover is that set. With no join path at all, every
identifier can take every P value of v_P. Computed with the capped linked values of
:mod:`streamdetect.relational.linked_values`; exact.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import networkx as nx
import polars as pl

from streamdetect.checks.findings import AssociationCoverFinding
from streamdetect.model.topology import FunctionalDependency, ViewDefinition
from streamdetect.relational.closure import view_graph
from streamdetect.relational.linked_values import linked_values


def key_path(  # noqa: PLR0911 -- each early return names one condition of the subcase
    views: Sequence[ViewDefinition],
    dependencies: Sequence[FunctionalDependency],
    attributes: Sequence[str],
    identifier: str,
    sensitive: str,
) -> list[str] | None:
    """The views of the unique join path from ID's view to P's view ([] when none joins them), or None
    when the subcase does not apply (ID not the key, other FDs, selections, ambiguous views or paths)."""
    if any(view.where is not None for view in views) or not dependencies:
        return None
    if any(fd.lhs != (identifier,) for fd in dependencies):
        return None
    determined = {a for fd in dependencies for a in fd.rhs}
    if not set(attributes) - {identifier} <= determined:
        return None
    holders_id = [v.name for v in views if identifier in v.attributes]
    holders_p = [v.name for v in views if sensitive in v.attributes]
    if len(holders_id) != 1 or len(holders_p) != 1:
        return None
    graph = view_graph(views)
    source, target = holders_id[0], holders_p[0]
    if source == target:
        return [source]
    if not nx.has_path(graph, source, target):
        return []
    paths = list(nx.all_simple_edge_paths(graph, source, target))
    if len(paths) != 1:
        return None
    return [source, *(edge[1] for edge in paths[0])]


def key_covers(
    path: Sequence[str],
    frames: Mapping[str, pl.DataFrame],
    *,
    views: Sequence[ViewDefinition],
    identifier: str,
    sensitive: str,
    k: int,
) -> list[AssociationCoverFinding]:
    """The covers below k when ID is the key: the values the join path links each identifier to."""
    by_name = {view.name: view for view in views}
    holder_id = next(v.name for v in views if identifier in v.attributes)
    holder_p = next(v.name for v in views if sensitive in v.attributes)
    if path:
        relations = {name: frames[name].select(by_name[name].attributes).drop_nulls().unique() for name in path}
        linked = linked_values(relations, identifier, sensitive, k)
        names = tuple(sorted(path))
    else:
        values = frames[holder_p].get_column(sensitive).drop_nulls().unique().head(k)
        ids = frames[holder_id].get_column(identifier).drop_nulls().unique()
        linked = pl.DataFrame({identifier: ids}).join(pl.DataFrame({sensitive: values}), how="cross")
        names = tuple(sorted({holder_id, holder_p}))
    grouped = linked.group_by(identifier).agg(pl.col(sensitive)).filter(pl.col(sensitive).list.len() < k)
    return sorted(
        (
            AssociationCoverFinding(
                k=k,
                identifier_attribute=identifier,
                identifier_value=value,
                sensitive_attribute=sensitive,
                sensitive_values=tuple(sorted(values, key=str)),
                views=names,
            )
            for value, values in grouped.iter_rows()
        ),
        key=lambda f: str(f.identifier_value),
    )


@dataclass(frozen=True)
class KeyPathCoverCheck:
    """Section 6.3.1 for every (ID, P) pair, each with its join path (see :func:`key_path`)."""

    views: tuple[ViewDefinition, ...]
    paths: Mapping[tuple[str, str], Sequence[str]]
    k: int = 2

    def run(
        self, frames: Mapping[str, pl.DataFrame], table: pl.DataFrame | None = None
    ) -> list[AssociationCoverFinding]:
        """The covers below k for every pair (``table`` unused)."""
        return [
            finding
            for (identifier, sensitive), path in self.paths.items()
            for finding in key_covers(
                path, frames, views=self.views, identifier=identifier, sensitive=sensitive, k=self.k
            )
        ]
