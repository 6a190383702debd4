"""Releases proposed for a topology whose checks find violations, each re-checked by every configured
check before it is offered (``streamdetect remediate``).

Two kinds, from the project's papers:

* **generalized**: the table k-anonymized by K-MSD-AG (Huang et al. 2014; :mod:`.kmsd`), every view
  recomputed from it: the same rows as before (a view's selection is applied to the original rows, so
  exactly the rows it released are released), with their quasi-identifiers generalized;
* **fragmented**: the fewest fragments that keep the confidentiality constraints apart and satisfy the
  visibility requirements (De Capitani di Vimercati et al. 2010; :mod:`.fragmentation`), published as
  the views, with a k-loose association between the first two fragments that cover a constraint
  together (:mod:`.loose`), verified against Definition 5.4.

A proposal is *safe* only when the re-run of the topology's checks on it finds nothing (and its loose
association verifies): nothing unsafe is proposed as safe. The re-check runs the proposal's views
without their selections (the rows are already selected; generalized values do not fit the selections'
typed literals), so selection-aware refinements (a "possible" link) count as findings: conservative.

Pure: frames and topologies in, proposals out.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from streamdetect.engine import Report, run_checks
from streamdetect.model.topology import AttributeType, Topology, ViewDefinition
from streamdetect.relational.dependencies import functional
from streamdetect.remediation.fragmentation import minimal_fragmentation
from streamdetect.remediation.kmsd import information_loss, k_msd_ag, prepare
from streamdetect.remediation.loose import alike_keys, fragment_codes, greedy_grouping, split_k, verify


@dataclass
class Proposal:
    """One release: what it is, the rows it would publish, the checks' findings on it, its cost."""

    kind: str
    description: str
    report: Report | None = None
    utility: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None
    views: dict[str, pl.DataFrame] = field(default_factory=dict)
    table: pl.DataFrame | None = None

    @property
    def safe(self) -> bool:
        """Re-checked and found clean (a proposal that could not be made or checked is not safe)."""
        return self.reason is None and self.report is not None and not self.report.findings


def _unselected(topology: Topology, views: tuple[ViewDefinition, ...]) -> Topology:
    return dataclasses.replace(
        topology, views=tuple(dataclasses.replace(v, where=None, where_text=None, source=None, sql=None) for v in views)
    )


def generalized(topology: Topology, table: pl.DataFrame, k: int) -> Proposal:
    """The table k-anonymized by K-MSD-AG along the topology's hierarchies, and every view recomputed from
    it; re-checked by the topology's checks."""
    quasi = list(topology.table.quasi_identifiers)
    proposal = Proposal("generalized", f"the table {k}-anonymized by K-MSD-AG on {', '.join(quasi) or 'nothing'}")
    if not quasi:
        proposal.reason = "the table declares no quasi-identifier to generalize"
        return proposal
    if table.height < k:
        proposal.reason = f"the table has {table.height} rows, fewer than k = {k}"
        return proposal
    columns = {a: table.get_column(a).cast(pl.String).to_list() for a in quasi}
    state = prepare(columns, topology.generalization)
    fds = [(fd.lhs, fd.rhs) for fd in topology.table.functional_dependencies]
    k_msd_ag(state, quasi, k, fds)
    released = table.with_columns(pl.Series(a, state.column(a), dtype=pl.String) for a in quasi)
    views = {}
    for view in topology.views:
        # The rows the view released, as generalized (its selection read on the original values).
        views[view.name] = view.rows_from(released)
    text: AttributeType = "str"  # generalized values are text ("021**", "10-19")
    types = {**topology.table.types, **dict.fromkeys(quasi, text)}
    checked = _unselected(
        dataclasses.replace(topology, table=dataclasses.replace(topology.table, types=types)), topology.views
    )
    proposal.report = run_checks(checked, views, table=released)
    loss = information_loss(state, quasi)
    proposal.utility = {
        "normalized_certainty_penalty": round(loss.ncp, 4),
        "discernibility": loss.discernibility,
        "generalization_distance": {a: most for a, (most, _) in loss.distance.items()},
        "functional_dependencies_kept": all(
            functional(released, fd.lhs, fd.rhs).holds
            for fd in topology.table.functional_dependencies
            if functional(table, fd.lhs, fd.rhs).holds
        ),
    }
    proposal.views, proposal.table = views, released
    return proposal


def fragmented(topology: Topology, table: pl.DataFrame, k: int) -> Proposal:
    """The minimal correct fragmentation as the views (all rows of the table, projected), with a k-loose
    association between the first two fragments that cover a constraint together; re-checked."""
    spec = topology.fragmentation
    proposal = Proposal("fragmented", "the fewest fragments that keep the confidentiality constraints apart")
    if spec is None:
        proposal.reason = "the topology declares no fragmentation: constraints and visibility requirements"
        return proposal
    found = minimal_fragmentation(topology.table.attributes, spec.constraints, spec.visibility)
    if found.fragments is None:
        proposal.reason = found.reason
        return proposal
    fragments = [list(f) for f in found.fragments]
    proposal.description = "fragments " + "; ".join("{" + ", ".join(f) + "}" for f in fragments)
    views = {f"fragment{i}": table.select(f) for i, f in enumerate(fragments, start=1)}
    definitions = tuple(ViewDefinition(name, tuple(frame.columns)) for name, frame in views.items())
    checked = _unselected(topology, definitions)
    # A recomputed check must find no identifier to join on: fragments share no attribute.
    proposal.report = run_checks(checked, views, table=table)
    withheld = [a for a in topology.table.attributes if not any(a in f for f in fragments)]
    proposal.utility = {"fragments": len(fragments), "withheld": withheld}
    association = _loose(table, fragments, spec.constraints, k)
    if association is not None:
        proposal.utility["loose_association"] = association
        if not association["verified"]:
            proposal.reason = "its loose association does not verify (Definition 5.4)"
    proposal.views, proposal.table = views, None
    return proposal


def _loose(
    table: pl.DataFrame, fragments: list[list[str]], constraints: tuple[tuple[str, ...], ...], k: int
) -> dict[str, Any] | None:
    """A k-loose association between the first two fragments that cover a constraint together."""
    for i, left in enumerate(fragments):
        for right in fragments[i + 1 :]:
            covered = [c for c in constraints if set(c) <= set(left) | set(right)]
            if not covered:
                continue
            left_codes, right_codes = fragment_codes(table, left, right, covered)
            left_keys, right_keys = alike_keys(left_codes), alike_keys(right_codes)
            k_left, k_right = split_k(k)
            grouping = greedy_grouping(left_keys, right_keys, k_left, k_right)
            return {
                "left": left,
                "right": right,
                "k": k,
                "suppressed": len(grouping.suppressed),
                "verified": not verify(grouping, left_keys, right_keys, k),
            }
    return None
