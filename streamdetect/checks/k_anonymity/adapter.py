"""Which k-anonymity method a topology calls for (Yao, Wang & Jajodia 2005), as one check object.

- no effective FD, projection-only: the exact join-based association covers, incremental
  (:mod:`streamdetect.checks.k_anonymity.association_covers`);
- no effective FD, selections: the exact cell procedure of Figure 5 (:mod:`.selection_covers`);
- the identifier is the key with one join path to P (6.3.1): exact (:mod:`.key_covers`);
- other effective FDs: the conservative complete-signature check of section 7, against the private
  table (:mod:`.conservative_covers`);
- the identifier is the key, two views with one selection (6.3.2): exact by matchings (:mod:`.key_matching`);
- other selections together with an effective FD: the conservative check with swap signatures.

The last three are recomputed per batch behind the same interface (:mod:`.recomputed`).

:class:`KAnonymity` is the check as the engine and the streaming worker see it (the protocol of
:mod:`.protocol`): the method above, and for every cover a minimal set of views that forces it
(:mod:`.forcing_views`), found by reruns on subsets of the views from the rows the state keeps.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import polars as pl

from streamdetect.checks.findings import AssociationCoverFinding, Delta, diff
from streamdetect.checks.k_anonymity.association_covers import AssociationCoverCheck, AssociationCoverState, CoverCodes
from streamdetect.checks.k_anonymity.conservative_covers import ConservativeCoverCheck
from streamdetect.checks.k_anonymity.forcing_views import minimal_forcing_views
from streamdetect.checks.k_anonymity.functional_dependencies import effective_dependencies
from streamdetect.checks.k_anonymity.key_covers import KeyPathCoverCheck, key_path
from streamdetect.checks.k_anonymity.key_matching import KeyMatchingCoverCheck, matching_subcase
from streamdetect.checks.k_anonymity.recomputed import RecomputedCheck, RowsState
from streamdetect.checks.k_anonymity.selection_covers import SelectionCoverCheck
from streamdetect.checks.presentation import Block, Section, Shown, association_cells, values_text
from streamdetect.checks.protocol import CheckProperties, CheckSummary, ProgressFactory
from streamdetect.checks.seen_rows import SeenRows
from streamdetect.model.batch import Batch
from streamdetect.model.topology import Topology

KAnonymityCheck = AssociationCoverCheck | RecomputedCheck[AssociationCoverFinding]


def k_anonymity_check(topology: Topology, k: int | None = None) -> KAnonymityCheck:
    """The k-anonymity check for the topology's subcase; ``k`` overrides the configured threshold."""
    schema = topology.table
    threshold = topology.threshold("k-anonymity", k)
    effective = effective_dependencies(topology.views, schema.functional_dependencies)
    selections = [view.name for view in topology.views if view.where is not None]
    names = topology.views
    if effective and selections:
        pairs = [(e, p) for e in schema.identifiers for p in schema.sensitive]
        cases = {
            pair: matching_subcase(topology.views, schema.functional_dependencies, schema.attributes, *pair)
            for pair in pairs
        }
        case = cases[pairs[0]] if len(pairs) == 1 else None
        if case is not None:
            matching = KeyMatchingCoverCheck(case[0], case[1], pairs[0][0], pairs[0][1], threshold)
            return RecomputedCheck(matching.run, names)
    if selections and not effective:
        cells = SelectionCoverCheck(topology.views, schema.identifiers, schema.sensitive, threshold)
        return RecomputedCheck(cells.run, names)
    if not effective:
        return AssociationCoverCheck.from_topology(topology, k=threshold)
    paths = {
        (e, p): key_path(topology.views, schema.functional_dependencies, schema.attributes, e, p)
        for e in schema.identifiers
        for p in schema.sensitive
    }
    if not selections and all(path is not None for path in paths.values()):
        known = {pair: path for pair, path in paths.items() if path is not None}
        return RecomputedCheck(KeyPathCoverCheck(topology.views, known, threshold).run, names)
    conservative = ConservativeCoverCheck(
        topology.views, schema.identifiers, schema.sensitive, tuple(effective), threshold
    )
    return RecomputedCheck(conservative.run, names, needs_table=True)


CoverKey = tuple[str, Any, str, frozenset[Any]]
KAnonymityState = AssociationCoverState | RowsState


def restricted(topology: Topology, subset: Collection[str], pairs: set[tuple[str, str]]) -> Topology:
    """The topology with only the views of ``subset`` and the (identifier, sensitive) attributes of ``pairs``
    (a rerun per pair is the cost, so only the pairs still asked about)."""
    table = replace(
        topology.table,
        identifiers=tuple(a for a in topology.table.identifiers if any(e == a for e, _ in pairs)),
        sensitive=tuple(a for a in topology.table.sensitive if any(s == a for _, s in pairs)),
    )
    return replace(topology, table=table, views=tuple(view for view in topology.views if view.name in subset))


def _releasing(topology: Topology, identifier: str, sensitive: str) -> tuple[list[str], list[str]]:
    """The views that release the identifier attribute, and those that release the sensitive one."""
    return (
        [view.name for view in topology.views if identifier in view.attributes],
        [view.name for view in topology.views if sensitive in view.attributes],
    )


def _cover_key(finding: AssociationCoverFinding) -> CoverKey:
    return (
        finding.identifier_attribute,
        finding.identifier_value,
        finding.sensitive_attribute,
        frozenset(finding.sensitive_values),
    )


def released(topology: Topology, views: Mapping[str, pl.DataFrame]) -> Topology:
    """The topology with the views the check reads given these rows (``topology`` when it reads all).

    A view with no rows is read as published empty: no row of the table satisfies its selection (Yao et
    al.'s I^v, with only the complement tuple set F_i0 = ¬C_i for it). A view with no rows and no
    selection would say that the table is empty, which any view with rows contradicts (no instance
    yields them, and the definition then holds vacuously for every set); on a stream it is a view whose
    rows have not arrived, or were all withdrawn: it is left out, and the views with rows are checked as
    published (docs/design.md, "Empty views").
    """
    kept = tuple(
        view
        for view in topology.views
        if view.where is not None or (view.name in views and not views[view.name].is_empty())
    )
    if len(kept) == len(topology.views):
        return topology
    return replace(topology, views=kept)


def _recomputed_covers(
    topology: Topology, views: Mapping[str, pl.DataFrame], table: pl.DataFrame | None, k: int | None
) -> list[AssociationCoverFinding] | None:
    """The covers a fresh run of the topology's method finds over the views it reads (:func:`released`),
    or None when that method needs a table not given."""
    check = k_anonymity_check(released(topology, views), k)
    if isinstance(check, RecomputedCheck):
        if check.needs_table and table is None:
            return None
        return check.result(RowsState(views=dict(views), table=table))
    state = check.initialize()
    check.add(state, {name: frame for name, frame in views.items() if any(v.name == name for v in check.views)})
    return check.result(state)


@dataclass(frozen=True)
class KAnonymity:
    """k-anonymity by views (Yao, Wang & Jajodia 2005) behind the check protocol; ``k`` overrides."""

    topology: Topology
    k_override: int | None = None
    name = "k-anonymity"

    @classmethod
    def from_topology(cls, topology: Topology, k: int | None = None, max_level: int | None = None) -> KAnonymity:
        """The check as the topology configures it, ``k`` overriding (the join of all views: no closure
        levels)."""
        del max_level
        return cls(topology, k)

    @cached_property
    def method(self) -> KAnonymityCheck:
        """The method the topology's subcase calls for (module docstring)."""
        return k_anonymity_check(self.topology, self.k_override)

    @property
    def k(self) -> int:
        """The threshold."""
        return self.topology.threshold(self.name, self.k_override)

    @property
    def properties(self) -> CheckProperties:
        """Needs the table for the FD method of section 7 (conservative: its findings say so)."""
        method = self.method
        reads_table = isinstance(method, RecomputedCheck) and method.needs_table
        return CheckProperties(
            needs_table=reads_table,
            retractions=True,
            table_reason="with effective functional dependencies it is checked conservatively against the table"
            if reads_table
            else "",
        )

    def initialize(self) -> KAnonymityState:
        """No rows seen."""
        return self.method.initialize()

    def _add(self, state: KAnonymityState, batch: Batch, progress: ProgressFactory | None) -> None:
        method = self.method
        if isinstance(method, AssociationCoverCheck):
            assert isinstance(state, AssociationCoverState)
            callback = progress(self.name, len(batch.views)) if progress is not None else None
            method.add(state, batch.views, callback, batch.retracted)
            return
        assert isinstance(state, RowsState)
        method.add(state, batch.views, batch.table, batch.retracted, batch.retracted_table)

    def validate(self, state: KAnonymityState, batch: Batch) -> str | None:
        """A withdrawn row that is not published (the rows are the state's own)."""
        if isinstance(state, AssociationCoverState):
            attributes = {view.name: view.attributes for view in self.topology.views}
            return state.seen.check_retractions(batch.retracted, attributes)
        return RecomputedCheck.check_retract(state, batch.retracted, batch.retracted_table)

    def update(
        self, state: KAnonymityState, batch: Batch, progress: ProgressFactory | None = None
    ) -> Delta[AssociationCoverFinding]:
        """Withdraw and add the batch's rows; return the covers raised and cleared (recomputed from the state)."""
        # The findings of the last update are cached in the state: the search for forcing views runs once.
        cached = state.findings
        before = cached if cached is not None else (self.result(state) if _has_rows(state) else [])
        self._add(state, batch, progress)
        state.log.record(self._logged(batch))
        after = self.result(state)
        state.findings = after
        return diff(before, after)

    def _logged(self, batch: Batch) -> Batch:
        """What of a batch the state depends on: the views' rows, and the table's when the method reads it."""
        if self.properties.needs_table:
            return batch
        return Batch(views=batch.views, retracted=batch.retracted)

    def merge(self, state: KAnonymityState, other: KAnonymityState) -> Delta[AssociationCoverFinding]:
        """Fold another partition's rows in."""
        if isinstance(other, AssociationCoverState):
            return self.update(state, Batch(views=other.seen.decoded()))
        return self.update(state, Batch(views=other.views, table=other.table))

    def result(self, state: KAnonymityState) -> list[AssociationCoverFinding]:
        """Every minimal cover below k, each with a minimal set of views that forces it."""
        if isinstance(state, AssociationCoverState):
            return self._projection_result(state)
        return self._recomputed_result(state)

    def _projection_result(self, state: AssociationCoverState) -> list[AssociationCoverFinding]:
        """Covers compared in dictionary codes: every subset run reuses the rows the state encoded."""
        method = self.method
        assert isinstance(method, AssociationCoverCheck)
        full = method.minimal_cover_codes(state)
        if not full:
            return []
        topology = self.topology

        def finds(subset: frozenset[str], wanted: Collection[CoverCodes]) -> set[CoverCodes]:
            narrower = k_anonymity_check(restricted(topology, subset, {(e, s) for e, s, _, _ in wanted}), self.k)
            if not isinstance(narrower, AssociationCoverCheck):
                return set()  # not the same method on fewer views (an FD became effective): not tried
            present = {name: state.seen.present(name) for name in subset}
            seen = SeenRows({name: rows for name, rows in present.items() if rows is not None}, state.seen.dictionaries)
            return set(narrower.minimal_cover_codes(narrower.recompute(seen)))

        def releases(key: CoverCodes) -> tuple[list[str], list[str]]:
            return _releasing(topology, key[0], key[1])

        order = [view.name for view in topology.views]
        hints = {key: frozenset(holders) for key, holders in full.items()}
        forcing = minimal_forcing_views(full, order, finds, releases=releases, hints=hints)
        return method.result(state, covers=full, views=forcing)

    def _recomputed_result(self, state: RowsState) -> list[AssociationCoverFinding]:
        method = self.method
        assert isinstance(method, RecomputedCheck)
        topology = self.topology
        if released(topology, state.views) is topology:
            found = method.result(state)
        else:
            found = _recomputed_covers(topology, state.views, state.table, self.k) or []
        if not found:
            return found

        def finds(subset: frozenset[str], wanted: Collection[CoverKey]) -> set[CoverKey]:
            narrower = restricted(topology, subset, {(key[0], key[2]) for key in wanted})
            frames = {name: frame for name, frame in state.views.items() if name in subset}
            covers = _recomputed_covers(narrower, frames, state.table, self.k)
            # None: that subset's method reads the private table, which this run does not have.
            return set() if covers is None else {_cover_key(finding) for finding in covers}

        def releases(key: CoverKey) -> tuple[list[str], list[str]]:
            return _releasing(topology, key[0], key[2])

        monotone = {_cover_key(finding): finding.exact for finding in found}
        hints = {_cover_key(finding): frozenset(finding.views) for finding in found}
        order = [view.name for view in topology.views]
        forcing = minimal_forcing_views(monotone, order, finds, releases=releases, monotone=monotone, hints=hints)
        return [replace(finding, views=tuple(sorted(forcing[_cover_key(finding)]))) for finding in found]

    def encode(self, state: KAnonymityState) -> bytes:
        """The method's state codec."""
        return state.to_bytes()

    def decode(self, data: bytes) -> KAnonymityState:
        """Inverse of :meth:`encode`."""
        if isinstance(self.method, AssociationCoverCheck):
            return AssociationCoverState.from_bytes(data)
        return RowsState.from_bytes(data)

    def changes(self, state: KAnonymityState) -> dict[str, bytes]:
        """The batches taken since the last call (:class:`~streamdetect.checks.batch_log.BatchLog`): the
        covers are recomputed, not append-only, so the log of what arrived is what a write carries."""
        return state.log.take()

    def apply_changes(self, state: KAnonymityState, pieces: Mapping[str, bytes]) -> KAnonymityState:
        """Fold another state's logged batches into ``state``, in order (a gap raises ``ValueError``)."""
        for batch in state.log.replay(pieces):
            self._add(state, batch, None)
        state.findings = None
        return state

    def summary(self, findings: int) -> CheckSummary:
        """One "channel" (the join of all views) and one task per (identifier, sensitive) pair."""
        schema = self.topology.table
        return CheckSummary(self.name, self.k, 1, len(schema.identifiers) * len(schema.sensitive), findings)


def _has_rows(state: KAnonymityState) -> bool:
    if isinstance(state, AssociationCoverState):
        return any(state.seen.height(name) for name in state.seen.rows)
    return bool(state.views) or state.table is not None


def section(summary: CheckSummary, findings: Sequence[AssociationCoverFinding], shown: Shown) -> Section:
    """The check's section of a report: one block of the association covers smaller than k."""
    heading = (
        f"k-anonymity (k = {summary.k}): minimal association covers smaller than k, "
        f"{summary.tasks} identifier/sensitive pair(s)"
    )
    if not findings:
        return Section(heading, ())
    columns = ("#", "id", "identifier", "value", "sensitive", "cover", "forced by views", "exact")
    rows = [
        (
            *association_cells(f, shown),
            "{" + values_text(f.sensitive_values) + "}",
            ", ".join(f.views),
            "yes" if f.exact else "no (conservative)",
        )
        for f in findings
    ]
    rows_shown, omitted = shown.cut(rows)
    title = f"association covers (every instance pairs the value with one of these): {len(findings)} finding(s)"
    return Section(heading, (Block(title, columns, rows_shown, omitted),))
