"""Which views force a finding: a minimal set of views whose check, rerun on just them, still finds it.

Yao, Wang & Jajodia 2005 (section 3): a cover is forced by the projection facts of the views. A report
must name the release to withhold, so a cover finding names a *minimal* set of views S: the check run on
S alone finds the same cover, and run on S without any one of its views does not.

Search, smallest sets first: subsets of the views by increasing size, among those that release both the
identifier and the sensitive attribute (a subset that does not release them cannot tie one to the
other); within a size, those holding the views whose facts gave the cover (its hint) first. A finding's
set is the first of its candidates that finds it: of fewest views, and minimal by inclusion because every
smaller candidate was tried. The order depends on the finding alone, so the set does too: a stream that
asks again only the candidates its batch changed (:class:`ForcingSearch`) ends where one search over the
same rows does. The work is shared: the findings at the same candidate are asked of it together, one
check run per subset and round, memoised. Real releases need two or three views per cover, so a handful
of small, cheap runs settle all findings (on BP: pairs of views instead of the six-view join).

Beyond ``max_runs`` candidates a finding falls back to greedy deletion from all the views
(drop each view in turn when the rest still finds the cover). For exact methods this is minimal too:
they are monotone (an instance that yields more views yields fewer, so a cover forced by S is forced by
every superset of S), so forcing sets are closed upwards and greedy deletion ends in a minimal one.
Conservative methods need not be monotone; their greedy sets are re-checked by single deletions until
none keeps the finding.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from itertools import combinations
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
#: The findings (their keys) a check run on a subset of the views finds, among the keys asked about
#: (a run may restrict itself to what those keys need, e.g. their attributes).
Finds = Callable[[frozenset[str], Collection[K]], AbstractSet[K]]
#: Subset runs of the smallest-first search before the greedy fallback.
MAX_RUNS = 64


#: A key's candidates: the views releasing its identifier and its sensitive attribute, and its hint.
Group = tuple[tuple[frozenset[str], frozenset[str]], frozenset[str]]
#: Where a search settled keys: their group and the position of their set among its candidates (None:
#: the greedy fallback, one set per key).
Place = tuple[Group, int | None]


@dataclass(frozen=True)
class Settled(Generic[K]):
    """A search's answer, kept for the next one: per key, a minimal forcing set (``views``); the keys'
    hints then; the keys per place (:data:`Place`); the keys it asked (the others kept the last search's
    set); the candidates per group (the same sets again next search)."""

    views: dict[K, frozenset[str]]
    hints: dict[K, frozenset[str]]
    members: dict[Place, set[K]]
    asked: set[K]
    candidates: dict[Group, list[frozenset[str]]]
    #: The last search's keys this one no longer has.
    left: set[K] = field(default_factory=set)


@dataclass
class ForcingSearch(Generic[K]):
    """Per finding key, a minimal set of ``views`` on which ``finds`` still returns it (module docstring), able to
    start from the last search's answer (:meth:`run`).

    ``releases(key)`` gives the views that release its identifier attribute and those that release its
    sensitive attribute (a forcing set holds one of each); ``views`` orders ties and deletions;
    ``monotone[key]`` (default True) says whether the method that found it is monotone in the views. At most
    ``max_runs`` candidate subsets per key, then O(|views|) runs per distinct greedy path.

    A key's candidates depend on the key alone (its group): the subsets that release both of its
    attributes by size, those holding its hint first within a size, then in ``views`` order; the first
    ``max_runs``. Its set is the first candidate that finds it, so the answer does not depend on the other
    keys asked with it: a stream's searches and one search over the same rows agree."""

    views: Sequence[str]
    finds: Finds[K]
    releases: Callable[[K], tuple[Collection[str], Collection[str]]] | None = None
    monotone: Mapping[K, bool] | None = None
    max_runs: int = MAX_RUNS
    memo: dict[frozenset[str], tuple[set[K], set[K]]] = field(default_factory=dict)
    candidates: dict[Group, list[frozenset[str]]] = field(default_factory=dict)

    def run(
        self,
        hints: Mapping[K, frozenset[str]],
        last: Settled[K] | None = None,
        changed: Collection[str] = (),
        moved: Collection[K] | None = None,
    ) -> Settled[K]:
        """A minimal forcing set per key of ``hints`` (its hint: views likely to force it).

        Given the ``last`` search's answer and the views whose rows ``changed`` since (a subset's answer
        depends on its views' rows alone), a key with the same hint keeps its set when no candidate up to it
        holds a changed view, and is asked again from the first candidate that does otherwise (those before
        still do not find it). Set operations per place: the keys that keep their sets cost nothing each.
        ``moved``: the keys that may be new, gone or have another hint since ``last`` (any others have the
        same hint), when the caller knows them: the hints are then not compared whole."""
        hints = dict(hints)  # the caller's mapping may change after the search
        position: dict[tuple[Group, int], set[K]] = {}
        members: dict[Place, set[K]] = {}
        fresh: Iterable[K] = hints
        left: set[K] = set()
        if last is not None:
            self.candidates.update(last.candidates)
            if moved is None:
                fresh = {key for key, _ in hints.items() - last.hints.items()}  # new, or with a new hint
                left = set(last.hints.keys() - hints.keys())
            else:
                fresh = {key for key in moved if key in hints and last.hints.get(key) != hints[key]}
                left = {key for key in moved if key not in hints and key in last.hints}
            self._resume(last, fresh | left, frozenset(changed), position, members)
        without: dict[Place, set[K]] = {}  # new keys with no candidate: the greedy fallback
        for key, group in self._groups(fresh, hints).items():
            if self._candidates(group):
                position.setdefault((group, 0), set()).add(key)
            else:
                without.setdefault((group, None), set()).add(key)
        for place, keys in without.items():
            _gather(members, place, keys)
        asked = set(fresh).union(*position.values())
        self._rounds(position, members)
        views: dict[K, frozenset[str]] = {}
        for (group, index), keys in members.items():
            if index is not None:
                views.update(dict.fromkeys(keys, self._candidates(group)[index]))
        greedy = {key for (_, index), keys in members.items() if index is None for key in keys}
        if greedy:
            views.update(_greedy(greedy, self.views, self.ask, self.monotone))
        return Settled(views, hints, members, asked | greedy, self.candidates, left)

    def _resume(
        self,
        last: Settled[K],
        stale: set[K],
        touched: frozenset[str],
        position: dict[tuple[Group, int], set[K]],
        members: dict[Place, set[K]],
    ) -> None:
        """Place the ``last`` search's keys but the ``stale`` ones: at their set when no candidate up to it
        holds a view ``touched``, at the first candidate that does otherwise (``position``: asked again)."""
        for (group, index), keys in last.members.items():
            kept = keys - stale if stale and not keys.isdisjoint(stale) else keys
            if not kept:
                continue
            first = self._first_touched(group, index, touched)
            if first is None:
                members[(group, index)] = kept
            elif first < len(self._candidates(group)):
                position.setdefault((group, first), set()).update(kept)
            else:
                _gather(members, (group, None), kept)

    def ask(self, subset: frozenset[str], wanted: set[K]) -> set[K]:
        """The keys of ``wanted`` that ``subset`` finds: memoised per subset and key (a subset asked again
        asks only the keys it was not asked about)."""
        asked, found = self.memo.setdefault(subset, (set(), set()))
        new = wanted - asked
        if new and subset:
            found |= self.finds(subset, new) & new
        asked |= new
        return found & wanted

    def _rounds(self, position: dict[tuple[Group, int], set[K]], members: dict[Place, set[K]]) -> None:
        """Settle the keys at ``position`` into ``members``: per round, every subset some keys are at is
        asked once for all of them; those it does not find move to their next candidate, or to the greedy
        fallback past the last."""
        while position:
            by_subset: dict[frozenset[str], list[tuple[Group, int]]] = {}
            for group, index in position:
                by_subset.setdefault(self._candidates(group)[index], []).append((group, index))
            following: dict[tuple[Group, int], set[K]] = {}
            for subset, entries in by_subset.items():
                found = self.ask(subset, set().union(*(position[entry] for entry in entries)))
                for group, index in entries:
                    keys = position[(group, index)]
                    settled = keys & found
                    if settled:
                        _gather(members, (group, index), settled)
                    rest = keys - settled
                    if not rest:
                        continue
                    if index + 1 < len(self._candidates(group)):
                        following.setdefault((group, index + 1), set()).update(rest)
                    else:
                        _gather(members, (group, None), rest)
            position = following

    def _first_touched(self, group: Group, index: int | None, touched: frozenset[str]) -> int | None:
        """The first of the group's candidates up to ``index`` holding a view of ``touched`` (a greedy
        set, None, is searched again when any view changed)."""
        if index is None:
            return 0 if touched else None
        chosen = self._candidates(group)
        return next((i for i in range(index + 1) if chosen[i] & touched), None)

    def _candidates(self, group: Group) -> list[frozenset[str]]:
        """The first ``max_runs`` subsets of the views that release both of the group's attributes, by
        size; within a size, those holding its hint first, then in the views' order."""
        chosen = self.candidates.get(group)
        if chosen is not None:
            return chosen
        sides, hint = group
        chosen = self.candidates[group] = []
        for size in range(1, len(self.views) + 1):
            if len(chosen) >= self.max_runs:
                break
            subsets = [s for s in map(frozenset, combinations(self.views, size)) if _releases_both(s, sides)]
            subsets.sort(key=lambda subset: not hint <= subset)  # stable: the views' order within each half
            chosen.extend(subsets)
        del chosen[self.max_runs :]
        return chosen

    def _groups(self, keys: Iterable[K], hints: Mapping[K, frozenset[str]]) -> dict[K, Group]:
        """Each key's group: the views releasing its attributes and its hint (few distinct groups)."""
        everything = frozenset(self.views)
        groups: dict[K, Group] = {}
        # A releases function answers alike for many keys (per attribute pair): freeze each answer once.
        frozen: dict[int, tuple[tuple[Collection[str], Collection[str]], tuple[frozenset[str], frozenset[str]]]] = {}
        made: dict[Group, Group] = {}
        for key in keys:
            sides = self.releases(key) if self.releases is not None else (everything, everything)
            known = frozen.get(id(sides))
            if known is None or known[0] is not sides:
                known = frozen[id(sides)] = (sides, (frozenset(sides[0]), frozenset(sides[1])))
            group = (known[1], hints[key])
            groups[key] = made.setdefault(group, group)
        return groups


def _gather(members: dict[Place, set[K]], place: Place, keys: set[K]) -> None:
    """Add ``keys`` to the keys at ``place``, in a new set: a place's set may be the last search's (kept
    whole), which stays as it was."""
    members[place] = members[place] | keys if place in members else set(keys)


def _releases_both(subset: frozenset[str], holders: tuple[frozenset[str], frozenset[str]]) -> bool:
    return all(subset & side for side in holders)


def _greedy(
    keys: Collection[K],
    views: Sequence[str],
    ask: Callable[[frozenset[str], set[K]], set[K]],
    monotone: Mapping[K, bool] | None,
) -> dict[K, frozenset[str]]:
    """Greedy deletion from all the views, shared per distinct subset; re-checked for non-monotone keys."""
    current: dict[K, frozenset[str]] = dict.fromkeys(keys, frozenset(views))
    for view in views:
        groups: dict[frozenset[str], set[K]] = {}
        for key, subset in current.items():
            if view in subset:
                groups.setdefault(subset, set()).add(key)
        for subset, members in groups.items():
            for key in ask(subset - {view}, members):
                current[key] = subset - {view}
    for key in [key for key in current if monotone is not None and not monotone.get(key, True)]:
        current[key] = _shrink(key, current[key], ask)
    return current


def _shrink(key: K, subset: frozenset[str], ask: Callable[[frozenset[str], set[K]], set[K]]) -> frozenset[str]:
    """Drop single views while the rest still finds ``key``, until no single deletion does."""
    while True:
        smaller = next((subset - {view} for view in sorted(subset) if ask(subset - {view}, {key})), None)
        if smaller is None:
            return subset
        subset = smaller
