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
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np
import polars as pl

from streamdetect.checks.findings import AssociationCoverFinding
from streamdetect.checks.k_anonymity.association_covers import AssociationCoverCheck, AssociationCoverState, Grown
from streamdetect.checks.k_anonymity.conservative_covers import ConservativeCoverCheck
from streamdetect.checks.k_anonymity.cover_index import CoverCodes
from streamdetect.checks.k_anonymity.forcing_views import minimal_forcing_views
from streamdetect.checks.k_anonymity.functional_dependencies import effective_dependencies
from streamdetect.checks.k_anonymity.key_covers import KeyPathCoverCheck, key_path
from streamdetect.checks.k_anonymity.key_matching import KeyMatchingCoverCheck, matching_subcase
from streamdetect.checks.k_anonymity.recomputed import RecomputedCheck, RowsState
from streamdetect.checks.k_anonymity.selection_covers import SelectionCoverCheck
from streamdetect.checks.protocol import ProgressFactory
from streamdetect.checks.seen_rows import SeenRows
from streamdetect.model.batch import Batch
from streamdetect.model.topology import Topology
from streamdetect.relational.linked_values import SharedWork

#: The raw check a method wraps (what :func:`k_anonymity_check` returns).
KAnonymityCheck = AssociationCoverCheck | RecomputedCheck[AssociationCoverFinding]
KAnonymityState = AssociationCoverState | RowsState
CoverKey = tuple[str, Any, str, frozenset[Any]]


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

    def initialize(self) -> Any:
        """No rows seen."""
        ...

    def decode(self, data: bytes) -> Any:
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


#: Searches in a row that may leave a subset's state unasked before it is dropped (its rows pile up).
IDLE_SEARCHES = 16
#: A subset state's key: the views, and the (identifier, sensitive) pairs it answers for.
SubsetKey = tuple[frozenset[str], frozenset[tuple[str, str]]]


#: A subset asked about at most this many covers, with no state kept, is run for them alone
#: (:meth:`JoinMethod.targeted`) instead of getting a state of its own.
TARGETED_COVERS = 2_000


@dataclass(frozen=True)
class Targeted:
    """A subset run for some covers alone: its check, the covers asked and those it found, and the rows its
    views had (the run depends on nothing else: the same rows, the same answer)."""

    check: AssociationCoverCheck
    wanted: frozenset[CoverCodes]
    found: frozenset[CoverCodes]
    rows: tuple[tuple[int, int], ...]

    @staticmethod
    def rows_of(check: AssociationCoverCheck, seen: SeenRows) -> tuple[tuple[int, int], ...]:
        """Per view of ``check``, the rows stored and those present."""
        return tuple(
            (seen.rows[view.name].height if view.name in seen.rows else 0, seen.height(view.name))
            for view in check.views
        )


@dataclass
class Answers:
    """Per cover asked, whether a subset run for it alone found it, while its views have these rows."""

    rows: tuple[tuple[int, int], ...]
    found: set[CoverCodes] = field(default_factory=set)
    missed: set[CoverCodes] = field(default_factory=set)


@dataclass(frozen=True)
class Search:
    """The last forcing-view search: the version of the minimal covers over all the views, the subsets it
    asked with what they answered (the version of a kept state's covers, a targeted run, or None: not
    tried), and the findings."""

    version: int
    asked: Mapping[SubsetKey, int | Targeted | None]
    findings: list[AssociationCoverFinding]


@dataclass
class SubsetState:
    """The check over a subset of the views and its state, which shares the rows of the state over all of
    them; grown by the rows they added since it was last asked (:meth:`catch_up`), not per batch: a
    search asks for some subsets only now and then."""

    check: AssociationCoverCheck
    state: AssociationCoverState
    #: Per batch since the last catch-up, per view, the rows that became present and their positions.
    pending: list[tuple[str, pl.DataFrame, pl.Series]] = field(default_factory=list)
    #: Searches in a row that did not ask for it.
    idle: int = 0

    def covers(self) -> Mapping[CoverCodes, frozenset[str]]:
        """The minimal covers over the subset, caught up."""
        self.catch_up()
        return self.check.minimal_cover_codes(self.state)

    @property
    def version(self) -> int:
        """The version of :meth:`covers` (read after it)."""
        assert self.state.index is not None
        return self.state.index.version

    def catch_up(self) -> None:
        """Grow the state by the rows pending, each view's rows in one delta (a delta join with the rows
        present now finds what the batches' joins would have, and the sets are capped unions)."""
        if not self.pending:
            return
        by_view: dict[str, list[tuple[pl.DataFrame, pl.Series]]] = {}
        for name, new, positions in self.pending:
            by_view.setdefault(name, []).append((new, positions))
        grown: Grown = [
            (
                name,
                pl.concat([new for new, _ in parts]),
                pl.concat([positions for _, positions in parts]),
                SharedWork(self.state.kept.caps),
            )
            for name, parts in by_view.items()
        ]
        self.pending = []
        self.check.grow(self.state, grown)


@dataclass(frozen=True)
class JoinMethod:
    """The association covers, incremental (projection-only views, no effective functional dependency)."""

    check: AssociationCoverCheck
    topology: Topology
    k: int
    reads_table = False

    def initialize(self) -> AssociationCoverState:
        return self.check.initialize()

    def decode(self, data: bytes) -> AssociationCoverState:
        return AssociationCoverState.from_bytes(data)

    def validate(self, state: AssociationCoverState, batch: Batch) -> str | None:
        attributes = {view.name: view.attributes for view in self.topology.views}
        return state.seen.check_retractions(batch.retracted, attributes)

    def add(self, state: AssociationCoverState, batch: Batch, progress: ProgressFactory | None) -> None:
        callback = progress("k-anonymity", len(batch.views)) if progress is not None else None
        grown = self.check.add(state, batch.views, callback, batch.retracted)
        if grown is None:
            state.subsets.clear()  # recomputed: the subsets' states are built again when asked for
            state.answers.clear()
            return
        for subset in state.subsets.values():
            subset.pending.extend((name, new, positions) for name, new, positions, _ in grown)

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
        """Covers compared in dictionary codes: every subset run reuses the rows the state encoded. The
        search is deterministic in the minimal covers over all the views and over the subsets it asks: when
        none of those changed since the last search, its findings stand (``state.search``)."""
        method = self.check
        full = method.minimal_cover_codes(state)
        if not full:
            state.subsets.clear()  # no search asks for them
            state.search = None
            return []
        assert state.index is not None
        last: Search | None = state.search
        if last is not None and last.version == state.index.version and self.unchanged(state, last.asked):
            self._age(state, set(last.asked))
            return last.findings
        topology = self.topology

        # The pairs some cover is of: a subset's state answers for those (kept and grown with the state,
        # it is asked again next batch); states this search does not ask for are dropped after it.
        pairs = frozenset((identifier, sensitive) for identifier, sensitive, _, _ in full)
        asked: dict[SubsetKey, int | Targeted | None] = {}

        def finds(subset: frozenset[str], wanted: Collection[CoverCodes]) -> AbstractSet[CoverCodes]:
            key = (subset, pairs)
            kept = state.subsets.get(key)
            if kept is None:
                narrower = choose_method(restricted(topology, subset, set(pairs)), self.k)
                if not isinstance(narrower, JoinMethod):
                    asked[key] = None
                    return set()  # not the same method on fewer views (an FD became effective): not tried
                if len(wanted) <= TARGETED_COVERS:
                    found = self.targeted(state, narrower.check, wanted)
                    answer = Targeted(
                        narrower.check, frozenset(wanted), found, Targeted.rows_of(narrower.check, state.seen)
                    )
                    asked[key] = answer
                    return answer.found
                # Many covers: the subset's state is kept and grown with the state's (asked again next batch).
                subset_state = narrower.check.recompute(state.seen)
                subset_state.kept = state.kept  # the same rows: the same projections
                kept = state.subsets[key] = SubsetState(narrower.check, subset_state)
            covers = kept.covers()
            asked[key] = kept.version
            return covers.keys()

        releasing: dict[tuple[str, str], tuple[list[str], list[str]]] = {}

        def releases(key: CoverCodes) -> tuple[list[str], list[str]]:
            pair = (key[0], key[1])
            if pair not in releasing:
                releasing[pair] = _releasing(topology, *pair)
            return releasing[pair]

        order = [view.name for view in topology.views]
        # The views whose facts give each cover (frozen sets, the index's own): tried first.
        forcing = minimal_forcing_views(full, order, finds, releases=releases, hints=full)
        self._age(state, set(asked))
        findings = method.result(state, covers=full, views=forcing)
        state.search = Search(state.index.version, asked, findings)
        return findings

    def unchanged(self, state: AssociationCoverState, asked: Mapping[SubsetKey, int | Targeted | None]) -> bool:
        """Whether every subset a search asked finds what it found then (kept states caught up first,
        targeted runs run again)."""
        for key, answer in asked.items():
            if answer is None:
                continue  # another method on those views: not tried, whatever the rows
            if isinstance(answer, Targeted):
                if Targeted.rows_of(answer.check, state.seen) == answer.rows:
                    continue  # its views did not change
                if self.targeted(state, answer.check, answer.wanted) != answer.found:
                    return False
                continue
            kept = state.subsets.get(key)
            if kept is None:
                return False
            kept.covers()
            if kept.version != answer:
                return False
        return True

    def targeted(
        self, state: AssociationCoverState, narrower: AssociationCoverCheck, wanted: Collection[CoverCodes]
    ) -> frozenset[CoverCodes]:
        """Which of the covers ``wanted`` (minimal over all the views) the check over fewer views finds,
        from the projection facts that can give them there: a fact whose w(p) over all the views holds one
        identifier value gives over fewer views a cover containing the one it gives over all (w only grows
        as views are left out), so a wanted cover, and any smaller cover of its value, comes from a fact
        that gives a cover of that value over all the views, or from one whose w(p) is empty there. The
        minimal covers among those facts' are the subset's for these values: no state of its own."""
        assert state.index is not None
        subset = frozenset(view.name for view in narrower.views)
        rows = Targeted.rows_of(narrower, state.seen)
        answers = state.answers.get(subset)
        if answers is None or answers.rows != rows:
            # Which covers a subset finds depends on its views' rows alone: kept per cover until they change.
            answers = state.answers[subset] = Answers(rows)
        unknown = [cover for cover in wanted if cover not in answers.found and cover not in answers.missed]
        if unknown:
            found = self._run_for(state, narrower, unknown)
            answers.found |= found
            answers.missed |= set(unknown) - found
        return frozenset(cover for cover in wanted if cover in answers.found)

    def _run_for(
        self, state: AssociationCoverState, narrower: AssociationCoverCheck, wanted: Collection[CoverCodes]
    ) -> set[CoverCodes]:
        """:meth:`targeted`'s run, for covers not answered yet."""
        assert state.index is not None
        codes: dict[tuple[str, str], set[int]] = {}
        for identifier, sensitive, code, _ in wanted:
            codes.setdefault((identifier, sensitive), set()).add(code)
        giving = state.index.givers_of(codes)
        sources = {
            (view.name, identifier, sensitive): np.union1d(
                giving.get((view.name, identifier, sensitive), np.zeros(0, dtype=np.int64)),
                self.check.unjoined(state, (view.name, identifier, sensitive)),
            )
            for view in narrower.views
            if state.seen.height(view.name)
            for identifier, sensitive in codes
        }
        found = narrower.covers_given_by(state.seen, state.kept, sources, codes)
        return {cover for cover in wanted if cover in found}

    @staticmethod
    def _age(state: AssociationCoverState, asked: set[SubsetKey]) -> None:
        """Count the searches that did not ask for each subset state; drop those idle too long, and the
        answers of subsets this search did not run for covers alone."""
        subsets = {subset for subset, _ in asked}
        state.answers = {subset: answers for subset, answers in state.answers.items() if subset in subsets}
        for key, subset in list(state.subsets.items()):
            subset.idle = 0 if key in asked else subset.idle + 1
            if subset.idle > IDLE_SEARCHES:
                del state.subsets[key]


@dataclass(frozen=True)
class RecomputedMethod:
    """A method that keeps the rows and recomputes the covers per batch."""

    check: RecomputedCheck[AssociationCoverFinding]
    topology: Topology
    k: int

    @property
    def reads_table(self) -> bool:
        return self.check.needs_table

    def initialize(self) -> RowsState:
        return self.check.initialize()

    def decode(self, data: bytes) -> RowsState:
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

    def covers(self, state: RowsState) -> list[AssociationCoverFinding]:
        """The covers over the views read (:func:`released`), each with a minimal forcing set of views."""
        topology = self.topology
        if released(topology, state.views) is topology:
            found = self.check.result(state)
        else:
            found = recomputed_covers(topology, state.views, state.table, self.k) or []
        if not found:
            return found

        def finds(subset: frozenset[str], wanted: Collection[CoverKey]) -> set[CoverKey]:
            narrower = restricted(topology, subset, {(key[0], key[2]) for key in wanted})
            frames = {name: frame for name, frame in state.views.items() if name in subset}
            covers = recomputed_covers(narrower, frames, state.table, self.k)
            # None: that subset's method reads the private table, which this run does not have.
            return set() if covers is None else {_cover_key(finding) for finding in covers}

        def releases(key: CoverKey) -> tuple[list[str], list[str]]:
            return _releasing(topology, key[0], key[2])

        monotone = {_cover_key(finding): finding.exact for finding in found}
        hints = {_cover_key(finding): frozenset(finding.views) for finding in found}
        order = [view.name for view in topology.views]
        forcing = minimal_forcing_views(monotone, order, finds, releases=releases, monotone=monotone, hints=hints)
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
        cells = SelectionCoverCheck(topology.views, schema.identifiers, schema.sensitive, threshold)
        return RecomputedMethod(RecomputedCheck(cells.run, names), topology, threshold)
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


def recomputed_covers(
    topology: Topology, views: Mapping[str, pl.DataFrame], table: pl.DataFrame | None, k: int | None
) -> list[AssociationCoverFinding] | None:
    """The covers a fresh run of the topology's method finds over the views it reads (:func:`released`),
    or None when that method needs a table not given."""
    method = choose_method(released(topology, views), k)
    if method.reads_table and table is None:
        return None
    return method.fresh_covers(views, table)
