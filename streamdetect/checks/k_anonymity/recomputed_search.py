"""The forcing-view search of the recomputed methods (:class:`~.methods.RecomputedMethod`), kept across updates.

A recomputed method finds its covers from every row each batch, and its findings' views by reruns on subsets of
the views (:mod:`.forcing_views`). A subset's answer depends on its views' rows alone (and on the table's, for a
method that reads it): a run is kept with the generations of the rows it read (:attr:`RowsState.generations`)
and asked again only when one of them changed, and the search resumes from the last one's answer, asking again
only the covers with a candidate up to their set among the subsets a batch changed. A batch of one view then
reruns only the subsets holding that view, for the covers that reach them, and ends where a fresh search over the
same rows does (:class:`~.forcing_views.ForcingSearch`). For the cell procedure a subset is asked, per pair, as
the subset without its views redundant for the pair (:func:`.redundant_views.without_redundant_views_in_rows`),
so the subsets that only add a view filtering nothing share one run.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from streamdetect.checks.k_anonymity.forcing_views import MAX_RUNS, ForcingSearch, Settled
from streamdetect.checks.k_anonymity.recomputed import TABLE, RowsState
from streamdetect.checks.k_anonymity.redundant_views import without_redundant_views_in_rows
from streamdetect.model.topology import ViewDefinition

#: A cover: (identifier attribute, identifier value, sensitive attribute, sensitive values).
CoverKey = tuple[str, Any, str, frozenset[Any]]
Pair = tuple[str, str]
#: The covers a fresh run of the method over a subset of the views finds for some pairs.
Run = Callable[[frozenset[str], frozenset[Pair]], set[CoverKey]]


@dataclass(frozen=True)
class _Answer:
    """A subset's covers for some pairs, and the generations of the rows (views, maybe the table) read."""

    read: tuple[str, ...]
    generations: tuple[int, ...]
    found: frozenset[CoverKey]


@dataclass
class KeptSearch:
    """What the search keeps in :attr:`RowsState.search`: the runs per (subset, pairs), the last answer and
    the generations of every view's rows (and the table's) it was found from."""

    answers: dict[tuple[frozenset[str], frozenset[Pair]], _Answer] = field(default_factory=dict)
    #: Per (subset, pair), the subset without its views redundant for the pair, and the generations of its
    #: views' rows then.
    reductions: dict[tuple[frozenset[str], Pair], tuple[tuple[int, ...], frozenset[str]]] = field(default_factory=dict)
    settled: Settled[CoverKey] | None = None
    generations: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class RecomputedSearch:
    """One update's search over ``state``. ``run(subset, pairs)``: the covers a fresh run finds there;
    ``per_pair``: a pair's covers are the run's for that pair alone (kept per pair); ``with_table``: a run
    may read the table's rows (the topology declares functional dependencies). ``definitions``: the views, when
    a subset may be answered without its views redundant for a pair (the cell procedure, per pair, with no
    functional dependency: :func:`.redundant_views.without_redundant_views_in_rows`); None otherwise."""

    views: Sequence[str]
    run: Run
    releases: Callable[[CoverKey], tuple[Collection[str], Collection[str]]]
    per_pair: bool
    with_table: bool
    definitions: Mapping[str, ViewDefinition] | None = None

    def forcing(
        self, state: RowsState, hints: dict[CoverKey, frozenset[str]], monotone: dict[CoverKey, bool]
    ) -> dict[CoverKey, frozenset[str]]:
        """A minimal forcing set per cover of ``hints``, from the last search's answer and kept runs."""
        kept = state.search if isinstance(state.search, KeptSearch) else KeptSearch()
        state.search = kept
        now = {name: state.generation(name) for name in [*self.views, TABLE]}
        changed = [name for name in self.views if now[name] != kept.generations.get(name)]
        if self.with_table and now[TABLE] != kept.generations.get(TABLE):
            changed = list(self.views)
        # Runs whose rows changed are stale: dropped (asked again, they run again).
        kept.answers = {
            key: answer
            for key, answer in kept.answers.items()
            if answer.generations == tuple(now[name] for name in answer.read)
        }
        kept.reductions = {
            key: known
            for key, known in kept.reductions.items()
            if known[0] == tuple(now[name] for name in sorted(key[0]))
        }

        def finds(subset: frozenset[str], wanted: Collection[CoverKey]) -> set[CoverKey]:
            return self._finds(state, kept, subset, {(key[0], key[2]) for key in wanted})

        search = ForcingSearch(self.views, finds, self.releases, monotone, MAX_RUNS)
        settled = search.run(hints, kept.settled, changed)
        kept.settled, kept.generations = settled, now
        return settled.views

    def _finds(self, state: RowsState, kept: KeptSearch, subset: frozenset[str], pairs: set[Pair]) -> set[CoverKey]:
        """The covers of ``pairs`` a run over ``subset`` finds: kept answers, runs for the rest (per pair, of the
        subset without its views redundant for the pair when the method allows it)."""
        if not self.per_pair:
            return self._answer(state, kept, subset, frozenset(pairs))
        by_subset: dict[frozenset[str], set[Pair]] = {}
        for pair in pairs:
            by_subset.setdefault(self._reduced(state, kept, subset, pair), set()).add(pair)
        found: set[CoverKey] = set()
        for smaller, asked in by_subset.items():
            missing = {pair for pair in asked if (smaller, frozenset({pair})) not in kept.answers}
            if missing:
                self._answer(state, kept, smaller, frozenset(missing))
            for pair in asked:
                found |= kept.answers[(smaller, frozenset({pair}))].found
        return found

    def _reduced(self, state: RowsState, kept: KeptSearch, subset: frozenset[str], pair: Pair) -> frozenset[str]:
        """``subset`` without its views redundant for ``pair`` (itself without ``definitions``), kept while its
        views' rows are (:meth:`forcing` drops the reductions whose views' rows changed)."""
        if self.definitions is None:
            return subset
        known = kept.reductions.get((subset, pair))
        if known is None:
            generations = tuple(state.generation(name) for name in sorted(subset))
            smaller = without_redundant_views_in_rows(subset, pair, self.definitions, state.views)
            known = kept.reductions[(subset, pair)] = (generations, smaller)
        return known[1]

    def _answer(
        self, state: RowsState, kept: KeptSearch, subset: frozenset[str], pairs: frozenset[Pair]
    ) -> set[CoverKey]:
        """The covers of ``pairs`` over ``subset``: kept, or run (and kept, per pair when ``per_pair``)."""
        if not self.per_pair and (subset, pairs) in kept.answers:
            return set(kept.answers[(subset, pairs)].found)
        read = tuple(sorted(subset)) + ((TABLE,) if self.with_table else ())
        generations = tuple(state.generation(name) for name in read)
        covers = self.run(subset, pairs)
        if self.per_pair:
            for pair in pairs:
                own = frozenset(key for key in covers if (key[0], key[2]) == pair)
                kept.answers[(subset, frozenset({pair}))] = _Answer(read, generations, own)
        else:
            kept.answers[(subset, pairs)] = _Answer(read, generations, frozenset(covers))
        return covers
