"""Why a finding holds: the rows of the released views that produce it. Pure: frames in, frames out.

Used by ``streamdetect explain``. Each explanation is a list of (title, frame) sections, small by
construction (joins are taken with a row cap), that a publisher can read to see which release to
withhold. Every explainer takes ``(topology, views, table, finding)`` (the table None when not loaded);
each check's registration names its own (:mod:`streamdetect.checks.registry`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import polars as pl

from streamdetect.checks.findings import AssociationCoverFinding, GroupFinding, LinkageFinding, SindFinding
from streamdetect.errors import TopologyError
from streamdetect.model.predicates import to_polars
from streamdetect.model.topology import Topology
from streamdetect.relational.materialise import materialise

Section = tuple[str, pl.DataFrame]
SAMPLE = 10


def _join_sample(
    topology: Topology,
    views: Mapping[str, pl.DataFrame],
    names: tuple[str, ...],
    filters: Mapping[str, Sequence[object]],
) -> pl.DataFrame:
    """Up to SAMPLE rows of the natural join of ``names`` where each filtered attribute takes one of
    its listed values (filters applied to every view holding the attribute)."""
    relations = {}
    for name in names:
        frame = views[name].unique()
        for attribute, values in filters.items():
            if attribute in frame.columns:
                # Values may come back from a saved JSON report as text (dates): cast them to the column's type.
                wanted = pl.Series(values).cast(frame.schema[attribute], strict=False)
                frame = frame.filter(pl.col(attribute).is_in(wanted.implode()))
        relations[name] = frame
    joined = materialise(relations, SAMPLE)
    order = [a for a in topology.table.attributes if a in joined.columns]
    return joined.select(order)


#: ``explain(topology, views, table, finding)``: the rows behind a finding.
Explain = Callable[[Topology, Mapping[str, pl.DataFrame], pl.DataFrame | None, Any], list[Section]]


def explain_linkage(
    topology: Topology, views: Mapping[str, pl.DataFrame], table: pl.DataFrame | None, finding: LinkageFinding
) -> list[Section]:
    """Rows of the minimal channel's join that tie the identifier value to its sensitive values, and
    each view's own rows on that path."""
    filters = {
        finding.identifier_attribute: [finding.identifier_value],
        finding.sensitive_attribute: list(finding.sensitive_values),
    }
    joined = _join_sample(topology, views, finding.views, filters)
    sections: list[Section] = [
        (
            f"the join of {{{', '.join(finding.views)}}} where {finding.identifier_attribute} = "
            f"{finding.identifier_value!r} (first {SAMPLE} rows): every row carries one of the linked values",
            joined,
        )
    ]
    for name in finding.views:
        attributes = [a for a in views[name].columns if a in joined.columns]
        sections.append((f"rows of {name} on that path", joined.select(attributes).unique(maintain_order=True)))
    return sections


def explain_cover(
    topology: Topology, views: Mapping[str, pl.DataFrame], table: pl.DataFrame | None, finding: AssociationCoverFinding
) -> list[Section]:
    """The projection facts that force the cover: rows of the join of all views with this identifier
    value and these sensitive values, projected on each view that forces it."""
    names = tuple(view.name for view in topology.views)
    filters = {
        finding.identifier_attribute: [finding.identifier_value],
        finding.sensitive_attribute: list(finding.sensitive_values),
    }
    joined = _join_sample(topology, views, names, filters)
    sections: list[Section] = [(f"the join of every view restricted to the cover (first {SAMPLE} rows)", joined)]
    for name in finding.views:
        attributes = [a for a in views[name].columns if a in joined.columns]
        sections.append(
            (
                f"projection facts of {name} whose tuple sets pair {finding.identifier_value!r} only with "
                f"{', '.join(map(repr, finding.sensitive_values))}",
                joined.select(attributes).unique(maintain_order=True),
            )
        )
    return sections


def explain_sind(
    topology: Topology, views: Mapping[str, pl.DataFrame], table: pl.DataFrame | None, finding: SindFinding
) -> list[Section]:
    """The class's members as each view sees them: selected or not, and the projected values."""
    if table is None:
        raise TopologyError(
            "explaining a SIND class needs the private table: set table.source", file=topology.path, key="table.source"
        )
    members = pl.DataFrame([dict(member) for member in finding.members])
    public = members.columns
    # Members read back from a saved report carry JSON values (dates as text): use the table's types.
    members = members.with_columns(pl.col(a).cast(table.schema[a], strict=False) for a in public)
    rows = members.join(table, on=public, how="left")
    sections: list[Section] = [("members of the class, with their current private values", rows)]
    for view in topology.views:
        if view.name not in finding.views:
            continue
        selected = (to_polars(view.where, table.schema) if view.where is not None else pl.lit(True)).fill_null(False)
        shown = [pl.when(pl.col("selected")).then(pl.col(a)).alias(f"shows {a}") for a in view.attributes]
        seen = rows.with_columns(selected.alias("selected")).select([*public, "selected", *shown])
        sections.append((f"as {view.name} ({view.where_text or 'no selection'}) sees them", seen))
    return sections


def explain_group(
    topology: Topology, views: Mapping[str, pl.DataFrame], table: pl.DataFrame | None, finding: GroupFinding
) -> list[Section]:
    """The rows of the group (of the view, or of the table), with the sensitive values they hold: what a
    recipient who knows a member's quasi-identifiers narrows them to."""
    if finding.relation is None and table is None:
        raise TopologyError("this group is the table's: set table.source", file=topology.path, key="table.source")
    rows = table if finding.relation is None else views.get(finding.relation)
    where = "the table" if finding.relation is None else f"view {finding.relation}"
    if rows is None:
        raise KeyError(f"{where} has no rows loaded")
    condition = pl.lit(True)
    for name, value in finding.group:
        # Values read back from a saved report are JSON (dates as text): compare with the column's type.
        typed = pl.lit(value).cast(rows.schema[name], strict=False)
        condition &= pl.col(name).is_null() if value is None else pl.col(name) == typed
    return [(f"the {finding.count} row(s) of the group in {where}", rows.filter(condition))]
