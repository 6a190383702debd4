"""The k-anonymity methods behind one interface (:class:`Method`), and the choice of the one a topology's
subcase calls for (:func:`choose_method`; the subcases: :mod:`streamdetect.checks.k_anonymity.adapter`).

:class:`JoinMethod` keeps the association covers incrementally; :class:`RecomputedMethod` keeps the rows
and recomputes (the cell procedure, key paths, key matching, the conservative covers). Both find, for
every cover, a minimal set of views that forces it (:mod:`.forcing_views`), by reruns on subsets of the
views from the rows their state keeps. The check (:class:`~streamdetect.checks.k_anonymity.adapter.KAnonymity`)
asks its method, never which method it is.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

import polars as pl

from streamdetect.checks.findings import AssociationCoverFinding, Delta, diff
from streamdetect.checks.k_anonymity.association_covers import AssociationCoverCheck, AssociationCoverState
from streamdetect.checks.k_anonymity.conservative_covers import ConservativeCoverCheck
from streamdetect.checks.k_anonymity.functional_dependencies import effective_dependencies
from streamdetect.checks.k_anonymity.join_search import JoinSearch, releasing
from streamdetect.checks.k_anonymity.key_covers import KeyPathCoverCheck, key_path
from streamdetect.checks.k_anonymity.key_matching import KeyMatchingCoverCheck, matching_subcase
from streamdetect.checks.k_anonymity.recomputed import RecomputedCheck, RowsState
from streamdetect.checks.k_anonymity.recomputed_search import CoverKey, RecomputedSearch
from streamdetect.checks.k_anonymity.selection_covers import SelectionCoverCheck
from streamdetect.checks.protocol import ProgressFactory
from streamdetect.model.batch import Batch
from streamdetect.model.topology import Topology

#: The raw check a method wraps (what :func:`k_anonymity_check` returns).
KAnonymityCheck = AssociationCoverCheck | RecomputedCheck[AssociationCoverFinding]
KAnonymityState = AssociationCoverState | RowsState


class Method(Protocol):
    """What the k-anonymity check asks of its method."""

    @property
    def check(self) -> KAnonymityCheck:
        """The method's own check object."""
        ...

    @property
    def reads_table(self) -> bool:
        """Whether it reads the private table's rows."""
        ...

    @property
    def per_pair(self) -> bool:
        """Whether its covers of each (identifier, sensitive) pair are its covers over a table declaring
        that pair alone (the same method chosen there: no effective functional dependency)."""
        ...

    def initialize(self) -> Any:
        """No rows seen."""
        ...

    def decode(self, data: bytes | memoryview) -> Any:
        """A state from its bytes."""
        ...

    def validate(self, state: Any, batch: Batch) -> str | None:
        """A withdrawn row that is not published, or None."""
        ...

    def add(self, state: Any, batch: Batch, progress: ProgressFactory | None) -> None:
        """Withdraw and add the batch's rows."""
        ...

    def has_rows(self, state: Any) -> bool:
        """Whether the state holds any row."""
        ...

    def rows(self, state: Any) -> Batch:
        """The state's rows as one batch (to fold into another state)."""
        ...

    def fresh_covers(
        self, views: Mapping[str, pl.DataFrame], table: pl.DataFrame | None
    ) -> list[AssociationCoverFinding]:
        """The covers of a fresh run over these rows."""
        ...

    def covers(self, state: Any) -> list[AssociationCoverFinding]:
        """Every minimal cover below k, each with a minimal set of views that forces it."""
        ...

    def changes(
        self, state: Any, before: list[AssociationCoverFinding], after: list[AssociationCoverFinding]
    ) -> Delta[AssociationCoverFinding]:
        """The covers raised and cleared from ``before`` to ``after`` (:meth:`covers` of the state)."""
        ...


@dataclass(frozen=True)
class JoinMethod:
    """The association covers, incremental (projection-only views, no effective functional dependency)."""

    check: AssociationCoverCheck
    topology: Topology
    k: int
    reads_table = False
    per_pair = True

    def initialize(self) -> AssociationCoverState:
        return self.check.initialize()

    def decode(self, data: bytes | memoryview) -> AssociationCoverState:
        return AssociationCoverState.from_bytes(data)

    def validate(self, state: AssociationCoverState, batch: Batch) -> str | None:
        attributes = {view.name: view.attributes for view in self.topology.views}
        return state.seen.check_retractions(batch.retracted, attributes)

    def add(self, state: AssociationCoverState, batch: Batch, progress: ProgressFactory | None) -> None:
        callback = progress("k-anonymity", len(batch.views)) if progress is not None else None
        grown = self.check.add(state, batch.views, callback, batch.retracted)
        JoinSearch.grown(state, grown)

    def has_rows(self, state: AssociationCoverState) -> bool:
        return any(state.seen.height(name) for name in state.seen.rows)

    def rows(self, state: AssociationCoverState) -> Batch:
        return Batch(views=state.seen.decoded())

    def fresh_covers(
        self, views: Mapping[str, pl.DataFrame], table: pl.DataFrame | None
    ) -> list[AssociationCoverFinding]:
        state = self.check.initialize()
        mine = {view.name for view in self.check.views}
        self.check.add(state, {name: frame for name, frame in views.items() if name in mine})
        return self.check.result(state)

    def covers(self, state: AssociationCoverState) -> list[AssociationCoverFinding]:
        """Covers compared in dictionary codes, each with a minimal forcing set (:mod:`.join_search`)."""
        return JoinSearch(self.check, self.topology, self._narrower).covers(state)

    def changes(
        self, state: AssociationCoverState, before: list[AssociationCoverFinding], after: list[AssociationCoverFinding]
    ) -> Delta[AssociationCoverFinding]:
        """What the state's last result changed when it went from ``before`` to ``after`` (kept by
        :meth:`AssociationCoverCheck.result`: no pass over every finding), their diff otherwise."""
        return state.changes(before, after)

    def _narrower(self, subset: frozenset[str], pairs: frozenset[tuple[str, str]]) -> AssociationCoverCheck | None:
        """The check over the views of ``subset`` for ``pairs``; None when it is another method there (an FD
        became effective)."""
        narrower = choose_method(restricted(self.topology, subset, set(pairs)), self.k)
        return narrower.check if isinstance(narrower, JoinMethod) else None


@dataclass(frozen=True)
class RecomputedMethod:
    """A method that keeps the rows and recomputes the covers per batch."""

    check: RecomputedCheck[AssociationCoverFinding]
    topology: Topology
    k: int
    #: The cell procedure: per pair. The methods with functional dependencies are chosen from every pair
    #: together (key paths for all, key matching for one), so a pair alone may call for another method.
    per_pair: bool = False

    @property
    def reads_table(self) -> bool:
        return self.check.needs_table

    def initialize(self) -> RowsState:
        return self.check.initialize()

    def decode(self, data: bytes | memoryview) -> RowsState:
        return RowsState.from_bytes(data)

    def validate(self, state: RowsState, batch: Batch) -> str | None:
        return RecomputedCheck.check_retract(state, batch.retracted, batch.retracted_table)

    def add(self, state: RowsState, batch: Batch, progress: ProgressFactory | None) -> None:
        self.check.add(state, batch.views, batch.table, batch.retracted, batch.retracted_table)

    def has_rows(self, state: RowsState) -> bool:
        return bool(state.views) or state.table is not None

    def rows(self, state: RowsState) -> Batch:
        return Batch(views=state.views, table=state.table)

    def fresh_covers(
        self, views: Mapping[str, pl.DataFrame], table: pl.DataFrame | None
    ) -> list[AssociationCoverFinding]:
        return self.check.result(RowsState(views=dict(views), table=table))

    def changes(
        self, state: RowsState, before: list[AssociationCoverFinding], after: list[AssociationCoverFinding]
    ) -> Delta[AssociationCoverFinding]:
        """The findings' diff: recomputed, they are new objects every batch."""
        return diff(before, after)

    def covers(self, state: RowsState) -> list[AssociationCoverFinding]:
        """The covers over the views read (:func:`released`), each with a minimal forcing set of views."""
        topology = self.topology
        if released(topology, state.views) is topology:
            found = self.check.result(state)
        else:
            found = recomputed_covers(topology, state.views, state.table, self.k) or []
        if not found:
            return found

        def run(subset: frozenset[str], pairs: frozenset[tuple[str, str]]) -> set[CoverKey]:
            narrower = restricted(topology, subset, set(pairs))
            frames = {name: frame for name, frame in state.views.items() if name in subset}
            covers = recomputed_covers(narrower, frames, state.table, self.k)
            # None: that subset's method reads the private table, which this run does not have.
            return set() if covers is None else {_cover_key(finding) for finding in covers}

        def releases(key: CoverKey) -> tuple[list[str], list[str]]:
            return releasing(topology, key[0], key[2])

        search = RecomputedSearch(
            [view.name for view in topology.views],
            run,
            releases,
            per_pair=self.per_pair,
            with_table=bool(topology.table.functional_dependencies),
            definitions=None
            if topology.table.functional_dependencies or not self.per_pair
            else {view.name: view for view in topology.views},
        )
        monotone = {_cover_key(finding): finding.exact for finding in found}
        hints = {_cover_key(finding): frozenset(finding.views) for finding in found}
        forcing = search.forcing(state, hints, monotone)
        return [replace(finding, views=tuple(sorted(forcing[_cover_key(finding)]))) for finding in found]


def choose_method(topology: Topology, k: int | None = None) -> Method:
    """The k-anonymity method for the topology's subcase; ``k`` overrides the configured threshold."""
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
            return RecomputedMethod(RecomputedCheck(matching.run, names), topology, threshold)
    if selections and not effective:
        dates = frozenset(a for a, kind in schema.types.items() if kind == "date")
        cells = SelectionCoverCheck(topology.views, schema.identifiers, schema.sensitive, threshold, dates=dates)
        return RecomputedMethod(RecomputedCheck(cells.run, names), topology, threshold, per_pair=True)
    if not effective:
        return JoinMethod(AssociationCoverCheck.from_topology(topology, k=threshold), topology, threshold)
    paths = {
        (e, p): key_path(topology.views, schema.functional_dependencies, schema.attributes, e, p)
        for e in schema.identifiers
        for p in schema.sensitive
    }
    if not selections and all(path is not None for path in paths.values()):
        known = {pair: path for pair, path in paths.items() if path is not None}
        return RecomputedMethod(
            RecomputedCheck(KeyPathCoverCheck(topology.views, known, threshold).run, names), topology, threshold
        )
    conservative = ConservativeCoverCheck(
        topology.views, schema.identifiers, schema.sensitive, tuple(effective), threshold
    )
    return RecomputedMethod(RecomputedCheck(conservative.run, names, needs_table=True), topology, threshold)


def k_anonymity_check(topology: Topology, k: int | None = None) -> KAnonymityCheck:
    """The raw check of the method the topology's subcase calls for (:func:`choose_method`)."""
    return choose_method(topology, k).check


def restricted(topology: Topology, subset: Collection[str], pairs: set[tuple[str, str]]) -> Topology:
    """The topology with only the views of ``subset`` and the (identifier, sensitive) attributes of ``pairs``
    (a rerun per pair is the cost, so only the pairs still asked about)."""
    table = replace(
        topology.table,
        identifiers=tuple(a for a in topology.table.identifiers if any(e == a for e, _ in pairs)),
        sensitive=tuple(a for a in topology.table.sensitive if any(s == a for _, s in pairs)),
    )
    return replace(topology, table=table, views=tuple(view for view in topology.views if view.name in subset))


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


def recomputed_covers(
    topology: Topology, views: Mapping[str, pl.DataFrame], table: pl.DataFrame | None, k: int | None
) -> list[AssociationCoverFinding] | None:
    """The covers a fresh run of the topology's method finds over the views it reads (:func:`released`),
    or None when that method needs a table not given."""
    method = choose_method(released(topology, views), k)
    if method.reads_table and table is None:
        return None
    return method.fresh_covers(views, table)
