"""Which views force a finding: a minimal set of views whose check, rerun on just them, still finds it.

Yao, Wang & Jajodia 2005 (section 3): a cover is forced by the projection facts of the views. A report
must name the release to withhold, so a cover finding names a *minimal* set of views S: the check run on
S alone finds the same cover, and run on S without any one of its views does not.

Search, smallest sets first: subsets of the views by increasing size, among those that release both the
identifier and the sensitive attribute (a subset that does not release them cannot tie one to the
other). The first size at which a subset finds the cover gives a set of fewest views, and it is minimal
by inclusion because every smaller subset was tried. The work is shared: one check run per subset for
every finding at once, memoised. Real releases need two or three views per cover, so a handful of small,
cheap runs settle all findings (on BP: pairs of views instead of the six-view join).

Beyond ``max_runs`` subsets the remaining findings fall back to greedy deletion from all the views
(drop each view in turn when the rest still finds the cover). For exact methods this is minimal too:
they are monotone (an instance that yields more views yields fewer, so a cover forced by S is forced by
every superset of S), so forcing sets are closed upwards and greedy deletion ends in a minimal one.
Conservative methods need not be monotone; their greedy sets are re-checked by single deletions until
none keeps the finding.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from itertools import combinations
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
#: The findings (their keys) a check run on a subset of the views finds, among the keys asked about
#: (a run may restrict itself to what those keys need, e.g. their attributes).
Finds = Callable[[frozenset[str], Collection[K]], AbstractSet[K]]
#: Subset runs of the smallest-first search before the greedy fallback.
MAX_RUNS = 64


def minimal_forcing_views(
    keys: Iterable[K],
    views: Sequence[str],
    finds: Finds[K],
    *,
    releases: Callable[[K], tuple[Collection[str], Collection[str]]] | None = None,
    monotone: Mapping[K, bool] | None = None,
    hints: Mapping[K, frozenset[str]] | None = None,
    max_runs: int = MAX_RUNS,
) -> dict[K, frozenset[str]]:
    """Per finding key, a minimal set of ``views`` on which ``finds`` still returns it (module docstring).

    ``releases(key)`` gives the views that release its identifier attribute and those that release its
    sensitive attribute (a forcing set holds one of each); ``views`` orders ties and deletions;
    ``monotone[key]`` (default True) says whether the method that found it is monotone in the views;
    ``hints[key]``, views likely to force it (tried first within a size; any order gives a minimal set).
    At most ``max_runs`` smallest-first runs, then O(|views|) runs per distinct greedy path.
    """
    memo: dict[frozenset[str], AbstractSet[K]] = {}
    asked = set(keys)

    def found(subset: frozenset[str]) -> AbstractSet[K]:
        # Memoised per subset for every key still asked about, so that later questions reuse the run.
        if subset not in memo:
            memo[subset] = finds(subset, asked) if subset else set()
        return memo[subset]

    everything = frozenset(views)
    pending = _groups(asked, everything, releases, hints)
    result: dict[K, frozenset[str]] = {}
    runs = 0
    for size in range(1, len(views) + 1):
        if not pending or runs >= max_runs:
            break
        subsets = [frozenset(chosen) for chosen in combinations(views, size)]
        # Subsets holding the views a finding was first seen through are likeliest to force it: try them
        # first, so that few runs settle the size (any subset of the size is as small).
        subsets.sort(key=lambda subset: -sum(len(keys) for (_, hint), keys in pending.items() if hint <= subset))
        for subset in subsets:
            if not pending:
                break
            wanted = [group for group in pending if _releases_both(subset, group[0])]
            if not wanted:
                continue
            if subset not in memo:
                runs += 1
                if runs > max_runs:
                    break
            kept = found(subset)
            for group in wanted:
                settled = pending[group] & kept
                for key in settled:
                    result[key] = subset
                remaining = pending[group] - settled
                if remaining:
                    pending[group] = remaining
                else:
                    del pending[group]
        asked = {key for keys in pending.values() for key in keys}  # later runs need only these
    pending_keys = {key for keys in pending.values() for key in keys}
    if pending_keys:
        result.update(_greedy(pending_keys, views, found, monotone))
    return result


Group = tuple[tuple[frozenset[str], frozenset[str]], frozenset[str]]


def _groups(
    keys: Iterable[K],
    everything: frozenset[str],
    releases: Callable[[K], tuple[Collection[str], Collection[str]]] | None,
    hints: Mapping[K, frozenset[str]] | None,
) -> dict[Group, set[K]]:
    """Keys that release through the same views and share a hint, together: the search works per group,
    so its bookkeeping grows with the groups (a handful), not with the findings."""
    groups: dict[Group, set[K]] = {}
    # A releases function answers alike for many keys (per attribute pair): freeze each answer once.
    frozen: dict[int, tuple[tuple[Collection[str], Collection[str]], tuple[frozenset[str], frozenset[str]]]] = {}
    for key in keys:
        sides = releases(key) if releases is not None else (everything, everything)
        known = frozen.get(id(sides))
        if known is None or known[0] is not sides:
            known = frozen[id(sides)] = (sides, (frozenset(sides[0]), frozenset(sides[1])))
        hint = hints.get(key, everything) if hints is not None else everything
        groups.setdefault((known[1], hint), set()).add(key)
    return groups


def _releases_both(subset: frozenset[str], holders: tuple[frozenset[str], frozenset[str]]) -> bool:
    return all(subset & side for side in holders)


def _greedy(
    keys: Collection[K],
    views: Sequence[str],
    found: Callable[[frozenset[str]], AbstractSet[K]],
    monotone: Mapping[K, bool] | None,
) -> dict[K, frozenset[str]]:
    """Greedy deletion from all the views, shared per distinct subset; re-checked for non-monotone keys."""
    current: dict[K, frozenset[str]] = dict.fromkeys(keys, frozenset(views))
    for view in views:
        groups: dict[frozenset[str], list[K]] = {}
        for key, subset in current.items():
            if view in subset:
                groups.setdefault(subset, []).append(key)
        for subset, members in groups.items():
            kept = found(subset - {view})
            for key in members:
                if key in kept:
                    current[key] = subset - {view}
    for key in [key for key in current if monotone is not None and not monotone.get(key, True)]:
        current[key] = _shrink(key, current[key], found)
    return current


def _shrink(key: K, subset: frozenset[str], found: Callable[[frozenset[str]], AbstractSet[K]]) -> frozenset[str]:
    """Drop single views while the rest still finds ``key``, until no single deletion does."""
    while True:
        smaller = next((subset - {view} for view in sorted(subset) if key in found(subset - {view})), None)
        if smaller is None:
            return subset
        subset = smaller
