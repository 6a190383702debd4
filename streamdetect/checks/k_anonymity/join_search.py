"""How the join-based method answers the forcing-view search (:mod:`.forcing_views`) on a stream.

The search asks subsets of the views which covers they find. A subset asked about many covers keeps a state
of the check over its views (:class:`SubsetState`), sharing the rows with the state over all of them and
grown with them when next asked; one asked about a few is run for those covers alone (:meth:`JoinSearch.targeted`),
its answers kept per cover while its views keep their rows. The search is deterministic in what it reads:
the minimal covers over all the views and what each subset answered, so its last result stands while none
of those changed (:class:`Search`). docs/design.md, "Which views force a cover" and "k-anonymity on the
stream".
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import polars as pl

from streamdetect.checks.findings import AssociationCoverFinding
from streamdetect.checks.k_anonymity.association_covers import (
    AssociationCoverCheck,
    AssociationCoverState,
    Changes,
    Grown,
    SetKey,
)
from streamdetect.checks.k_anonymity.cover_index import CoverCodes, CoverIndex, Giver
from streamdetect.checks.k_anonymity.forcing_views import ForcingSearch, Settled
from streamdetect.checks.k_anonymity.kept_relations import PF
from streamdetect.checks.k_anonymity.redundant_views import without_redundant_views
from streamdetect.checks.k_anonymity.withdrawals import Gone, facts_at
from streamdetect.checks.seen_rows import SeenRows
from streamdetect.model.topology import Topology, ViewDefinition
from streamdetect.relational.linked_values import Plan, SharedWork, linked_values

#: Searches in a row that may leave a subset's state unasked, its views changed, before it is dropped (its
#: rows pile up).
IDLE_SEARCHES = 16
#: A subset state's key: the views, and the (identifier, sensitive) pairs it answers for.
SubsetKey = tuple[frozenset[str], frozenset[tuple[str, str]]]
#: A subset asked for one pair's covers, and the subset without its views redundant for it.
Reductions = Mapping[tuple[SubsetKey, tuple[str, str]], frozenset[str]]


#: A subset asked about at most this many covers, with no state kept, is run for them alone
#: (:meth:`JoinSearch.targeted`) instead of getting a state of its own.
TARGETED_COVERS = 2_000
#: A subset whose run for some covers alone found this many in the last search gets a state of its own: it
#: settles covers batch after batch, and its state grows by the batch where a run starts from every fact.
SETTLING_COVERS = 100


@dataclass(frozen=True)
class Targeted:
    """A subset run for some covers alone: its check, the covers asked and those it found."""

    check: AssociationCoverCheck
    wanted: frozenset[CoverCodes]
    found: frozenset[CoverCodes]


def _rows_of(views: Sequence[ViewDefinition], seen: SeenRows) -> tuple[tuple[int, int, int], ...]:
    """Per view, the rows stored, those present and the mark of which are (:meth:`SeenRows.presence`): a
    subset's answers depend on nothing else (the same rows, the same answer)."""
    return tuple(
        (seen.rows[view.name].height if view.name in seen.rows else 0, seen.height(view.name), seen.presence(view.name))
        for view in views
    )


@dataclass
class Answers:
    """Per cover asked, whether a subset run for it alone found it, while its views have these rows."""

    rows: tuple[tuple[int, int, int], ...]
    found: set[CoverCodes] = field(default_factory=set)
    missed: set[CoverCodes] = field(default_factory=set)


@dataclass(frozen=True)
class Search:
    """The last forcing-view search: the version of the minimal covers over all the views and the rows of
    every view it read (:func:`_rows_of`), what it settled per cover (read by the next search: a subset's
    answer depends on its views' rows alone), the subsets it asked with what they answered (the version of a
    kept state's covers, a targeted run, or None: not tried), the subsets it answered by fewer views
    (:mod:`.redundant_views`), and the findings."""

    version: int
    rows: tuple[tuple[int, int, int], ...]
    settled: Settled[CoverCodes]
    asked: Mapping[SubsetKey, int | Targeted | None]
    findings: list[AssociationCoverFinding]
    reduced: Reductions = field(default_factory=dict)


@dataclass
class SubsetState:
    """The check over a subset of the views and its state, which shares the rows of the state over all of
    them; grown by the rows they added since it was last asked (:meth:`catch_up`), not per batch: a
    search asks for some subsets only now and then."""

    check: AssociationCoverCheck
    state: AssociationCoverState
    #: Per batch since the last catch-up, per view, the rows that became present and their positions.
    pending: list[tuple[str, pl.DataFrame, pl.Series]] = field(default_factory=list)
    #: The rows gone since the last catch-up (:mod:`.withdrawals`).
    gone: Gone = field(default_factory=list)
    #: Searches in a row that did not ask for it although its views had changed.
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
        """Take out the rows gone, against the rows present now (:mod:`.withdrawals`), then grow the state by
        the rows pending that are still present, each view's rows in one delta (a delta join with the rows
        present now finds what the batches' joins would have, and the sets are capped unions)."""
        seen = self.state.seen
        if self.gone:
            names = {view.name for view in self.check.views}
            gone = [entry for entry in self.gone if entry[0] in names]
            self.gone = []
            if gone:
                self.check.released(seen).withdraw(self.state, gone)
        if not self.pending:
            return
        by_view: dict[str, list[tuple[pl.DataFrame, pl.Series]]] = {}
        for name, new, positions in self.pending:
            by_view.setdefault(name, []).append((new, positions))
        grown: Grown = []
        for name, parts in by_view.items():
            new = pl.concat([new for new, _ in parts])
            positions = pl.concat([positions for _, positions in parts])
            # Rows withdrawn since they came (and any that came back: once).
            chosen = seen.is_present(name, positions) & positions.is_first_distinct()
            if not chosen.all():
                new, positions = new.filter(chosen), positions.filter(chosen)
            grown.append((name, new, positions, SharedWork(self.state.kept.caps)))
        self.pending = []
        self.check.grow(self.state, grown)


@dataclass(frozen=True)
class JoinSearch:
    """The forcing-view search of the join-based method over ``check``'s state; ``narrower(subset, pairs)``
    is the check over a subset of the views for some pairs (None: another method there, not tried). A subset
    with views redundant for a pair answers for its covers as the subset without them
    (:mod:`.redundant_views`); ``reduce`` False asks every subset itself (to test that this changes nothing)."""

    check: AssociationCoverCheck
    topology: Topology
    narrower: Callable[[frozenset[str], frozenset[tuple[str, str]]], AssociationCoverCheck | None]
    reduce: bool = True

    @staticmethod
    def grown(state: AssociationCoverState, changes: Changes | None) -> None:
        """After the state took a batch: its kept subset states get the rows gone and those grown, pending
        (``changes``), or, when the sets were recomputed (None), are dropped with the kept answers (built
        again when asked for)."""
        if changes is None:
            state.subsets.clear()
            state.answers.clear()
            state.search = None  # the sets were recomputed: the index is new
            return
        for subset in state.subsets.values():
            subset.gone.extend(changes.gone)
            subset.pending.extend((name, new, positions) for name, new, positions, _ in changes.grown)

    def covers(self, state: AssociationCoverState) -> list[AssociationCoverFinding]:
        """Covers compared in dictionary codes: every subset run reuses the rows the state encoded. A
        cover's forcing set depends on its hint and on the answers of subsets, and a subset's answer on its
        views' rows: a search asks again only the covers new or with a new hint, and those with a candidate
        up to their set whose views changed since the last search (:class:`~.forcing_views.ForcingSearch`); with nothing
        changed, its findings stand (``state.search``)."""
        method = self.check
        full = method.minimal_cover_codes(state)
        if not full:
            state.subsets.clear()  # no search asks for them
            state.search = None
            return []
        assert state.index is not None
        topology = self.topology
        rows = _rows_of(topology.views, state.seen)
        last: Search | None = state.search
        if last is not None and last.version == state.index.version and last.rows == rows:
            return last.findings
        if last is None:
            changed = [view.name for view in topology.views]
        else:
            compared = zip(topology.views, rows, last.rows, strict=True)
            changed = [view.name for view, now, then in compared if now != then]

        # The pairs some cover is of: a subset's state answers for those (kept and grown with the state,
        # it is asked again next batch); states the searches stop asking for are dropped.
        asks = _Asks(self, state, state.index.pairs())
        order = [view.name for view in topology.views]
        # The views whose facts give each cover (frozen sets, the index's own): tried first. The covers
        # the index changed since the last search are those whose hints may differ (the index's log).
        search = ForcingSearch(order, asks.finds, asks.releases)
        moved = state.index.moved_since(last.version) if last is not None else None
        settled = search.run(full, last.settled if last is not None else None, changed, moved)
        self._age(state, set(asks.asked), frozenset(changed))
        # Only the covers it asked can have other views than the last result's, when that result was this
        # search's last answer (and not, say, a result over every cover's holders).
        resumed = last is not None and state.reported_from is last.settled.views
        findings = method.result(
            state, covers=full, views=settled.views, since=settled.asked | settled.left if resumed else None
        )
        state.search = Search(state.index.version, rows, settled, asks.asked, findings, asks.reduced)
        return findings

    @cached_property
    def _views(self) -> dict[str, ViewDefinition]:
        return {view.name: view for view in self.topology.views}

    def reduced(self, state: AssociationCoverState, subset: frozenset[str], pair: tuple[str, str]) -> frozenset[str]:
        """``subset`` without its views redundant for ``pair`` (:mod:`.redundant_views`)."""
        return without_redundant_views(subset, pair, self._views, state.seen, state.kept)

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
        rows = _rows_of(narrower.views, state.seen)
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
                _unjoined(self.check, state, (view.name, identifier, sensitive)),
            )
            for view in narrower.views
            if state.seen.height(view.name)
            for identifier, sensitive in codes
        }
        found = _covers_given_by(narrower, state, sources, codes)
        return {cover for cover in wanted if cover in found}

    @staticmethod
    def _age(state: AssociationCoverState, asked: set[SubsetKey], changed: frozenset[str]) -> None:
        """Count, per subset state, the searches that did not ask for it although its views had changed
        (a search asks only the covers whose candidates changed: one whose views did not change says
        nothing of it); drop those idle too long, and the answers of subsets whose views changed and that
        this search did not run for covers alone (those of the others still hold)."""
        subsets = {subset for subset, _ in asked}
        state.answers = {
            subset: answers for subset, answers in state.answers.items() if subset in subsets or not subset & changed
        }
        for key, subset in list(state.subsets.items()):
            if key in asked:
                subset.idle = 0
            elif key[0] & changed:
                subset.idle += 1
            if subset.idle > IDLE_SEARCHES:
                del state.subsets[key]


@dataclass
class _Asks:
    """One search's questions to the subsets of the views, for the covers of ``pairs``: what each answered
    (``asked``), which it answered by fewer views (``reduced``), the check over each (``narrowers``)."""

    search: JoinSearch
    state: AssociationCoverState
    pairs: frozenset[tuple[str, str]]
    asked: dict[SubsetKey, int | Targeted | None] = field(default_factory=dict)
    reduced: dict[tuple[SubsetKey, tuple[str, str]], frozenset[str]] = field(default_factory=dict)
    narrowers: dict[frozenset[str], AssociationCoverCheck | None] = field(default_factory=dict)
    #: Per pair, the views releasing its identifier and its sensitive attribute (:func:`releasing`).
    released: dict[tuple[str, str], tuple[list[str], list[str]]] = field(default_factory=dict)

    def releases(self, cover: CoverCodes) -> tuple[list[str], list[str]]:
        """:func:`releasing` for the cover's pair, the same lists for every cover of it."""
        pair = (cover[0], cover[1])
        if pair not in self.released:
            self.released[pair] = releasing(self.search.topology, *pair)
        return self.released[pair]

    def narrower(self, subset: frozenset[str]) -> AssociationCoverCheck | None:
        if subset not in self.narrowers:
            self.narrowers[subset] = self.search.narrower(subset, self.pairs)
        return self.narrowers[subset]

    def finds(self, subset: frozenset[str], wanted: Collection[CoverCodes]) -> AbstractSet[CoverCodes]:
        """The covers of ``wanted`` that ``subset`` finds, each pair's asked of the subset without its views
        redundant for the pair (:mod:`.redundant_views`)."""
        if not self.search.reduce or self.narrower(subset) is None:
            return self.answer(subset, wanted)
        by_pair: dict[tuple[str, str], list[CoverCodes]] = {}
        for cover in wanted:
            by_pair.setdefault((cover[0], cover[1]), []).append(cover)
        own: list[CoverCodes] = []
        found: set[CoverCodes] = set()
        for pair, covers in by_pair.items():
            smaller = self.search.reduced(self.state, subset, pair)
            if smaller == subset or self.narrower(smaller) is None:
                own.extend(covers)
                continue
            self.reduced[((subset, self.pairs), pair)] = smaller
            if not all(smaller & set(side) for side in self.releases(covers[0])):
                continue  # it no longer releases the pair: nothing ties one to the other
            # Without its redundant views (irreducible); a kept state answers for every cover it has.
            found |= _among(self.answer(smaller, covers), covers)
        return found | self.answer(subset, own) if own else found

    def answer(self, subset: frozenset[str], wanted: Collection[CoverCodes]) -> AbstractSet[CoverCodes]:
        """The covers ``subset`` finds among ``wanted`` (a kept state's: every cover it has), from the
        subset's kept state or a run for these covers alone."""
        state, key = self.state, (subset, self.pairs)
        kept = state.subsets.get(key)
        if kept is None:
            narrower = self.narrower(subset)
            if narrower is None:
                self.asked[key] = None
                return set()  # not the same method on fewer views (an FD became effective): not tried
            last = state.search.asked.get(key) if state.search is not None else None
            settles = isinstance(last, Targeted) and len(last.found) >= SETTLING_COVERS
            if len(wanted) <= TARGETED_COVERS and not settles:
                found = self.search.targeted(state, narrower, wanted)
                before = self.asked.get(key)
                if isinstance(before, Targeted):  # asked again, for a subset it stands for
                    self.asked[key] = Targeted(narrower, before.wanted | frozenset(wanted), before.found | found)
                else:
                    self.asked[key] = Targeted(narrower, frozenset(wanted), found)
                return found
            # Many covers: the subset's state is kept and grown with the state's (asked again next batch).
            subset_state = narrower.recompute(state.seen)
            subset_state.kept = state.kept  # the same rows: the same projections
            kept = state.subsets[key] = SubsetState(narrower, subset_state)
        covers = kept.covers()
        self.asked[key] = kept.version
        return covers.keys()


def _among(found: AbstractSet[CoverCodes], covers: Collection[CoverCodes]) -> set[CoverCodes]:
    """The ``covers`` in ``found``, looking through the smaller of the two (a kept state answers with every
    cover it has, thousands, for a few asked)."""
    if len(covers) < len(found):
        return {cover for cover in covers if cover in found}
    return set(found).intersection(covers)


def _unjoined(check: AssociationCoverCheck, state: AssociationCoverState, giver: Giver) -> np.ndarray[Any, Any]:
    """The positions of the giver's projection facts whose w(p) is empty over all the views (no identifier
    value): the only ones that can give, over fewer views, a cover that gives nothing over all of them."""
    holder, identifier, sensitive = giver
    return np.flatnonzero(check.filled(state, (holder, identifier, sensitive, identifier)) == 0)


def _covers_given_by(
    narrower: AssociationCoverCheck,
    state: AssociationCoverState,
    sources: Mapping[Giver, np.ndarray[Any, Any]],
    codes: Mapping[tuple[str, str], Collection[int]],
) -> dict[CoverCodes, frozenset[str]]:
    """The minimal covers of the identifier values ``codes`` (per pair) among those the projection facts
    ``sources`` (positions, per giver) give over ``narrower``'s views, with their holders: the capped sets of
    those facts only, computed from the state's stored views (shared with it) without a state of their own;
    the sensitive sets only of the facts whose identifier set is one of those values."""
    active = narrower.released(state.seen)
    names = {view.name for view in active.views}
    shared = SharedWork(state.kept.caps)
    sets: dict[SetKey, pl.DataFrame] = {}
    givers = []
    for (holder, identifier, sensitive), positions in sources.items():
        wanted = codes.get((identifier, sensitive))
        if holder not in names or (identifier, sensitive) not in active.pairs or not len(positions) or not wanted:
            continue
        giver = (holder, identifier, sensitive)
        ids = _given_sets(active, state, giver, identifier, positions, shared)
        single = _single_of(ids, identifier, wanted)
        if single.is_empty():
            continue
        givers.append(giver)
        chosen = single.get_column(PF).to_numpy()
        given = _given_sets(active, state, giver, sensitive, chosen, shared)
        # The facts renumbered 0, 1, ... among those chosen: the index sizes its arrays by the largest PF
        # (its holder's tens of thousands of rows, for a few hundred facts: most of a run's time).
        numbered = np.unique(chosen)
        sets[(*giver, identifier)] = _renumbered(single, numbered, identifier)
        sets[(*giver, sensitive)] = _renumbered(given, numbered, sensitive)
    return CoverIndex.build(sets, givers, narrower.k, PF).minimal


def _renumbered(pairs: pl.DataFrame, numbered: np.ndarray[Any, Any], target: str) -> pl.DataFrame:
    """The pairs (PF, target) with each PF replaced by its place in ``numbered`` (sorted, holding them all)."""
    places = np.searchsorted(numbered, pairs.get_column(PF).to_numpy())
    return pl.DataFrame([pl.Series(PF, places, dtype=pl.UInt32), pairs.get_column(target)])


def _single_of(ids: pl.DataFrame, identifier: str, wanted: Collection[int]) -> pl.DataFrame:
    """The pairs (PF, identifier code) of ``ids`` (capped sets) whose fact's set is that one value, one of
    ``wanted``: counted in numpy (two polars queries, a window among them, cost a run 1 ms per giver)."""
    if not ids.height:
        return ids
    facts = ids.get_column(PF).to_numpy()
    _, inverse, counts = np.unique(facts, return_inverse=True, return_counts=True)
    values = ids.get_column(identifier).to_numpy()
    keep = (counts[inverse] == 1) & np.isin(values, np.fromiter(wanted, dtype=values.dtype, count=len(wanted)))
    return ids if keep.all() else ids.filter(pl.Series(keep))


def _given_sets(  # noqa: PLR0917 -- private; the targeted run passes its whole context
    check: AssociationCoverCheck,
    state: AssociationCoverState,
    giver: Giver,
    target: str,
    chosen: np.ndarray[Any, Any],
    shared: SharedWork,
) -> pl.DataFrame:
    """The capped ``target`` sets over ``check``'s views of the giver's projection facts at ``chosen``
    (positions)."""
    holder, identifier, _ = giver
    relations = {}
    for name, (attributes, filters) in check.reads((*giver, target)).items():
        relation = state.kept.relation(state.seen, name, attributes, name == holder, filters)
        relations[name] = facts_at(relation, chosen, state.kept) if name == holder else relation
    # The elimination order kept per (set, subset, size classes), as the delta joins keep theirs: a subset is
    # run for some covers alone batch after batch, and estimating the order again cost an eighth of a run.
    sizes = tuple(frame.height.bit_length() // 2 for frame in relations.values())
    subset = "targeted " + ",".join(relations)
    plan = state.plans.setdefault(((*giver, target), subset, sizes), Plan())
    return linked_values(relations, PF, target, check.cap(identifier, target), shared, plan=plan)


def releasing(topology: Topology, identifier: str, sensitive: str) -> tuple[list[str], list[str]]:
    """The views that release the identifier attribute, and those that release the sensitive one."""
    return (
        [view.name for view in topology.views if identifier in view.attributes],
        [view.name for view in topology.views if sensitive in view.attributes],
    )
