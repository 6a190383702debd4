"""The closure beyond the kept levels: searched, for the identifier values it can still change, when a
result is asked (docs/design.md, "Many views").

The check keeps incremental sets for the lowest levels of the closure (``_Tasks.levels``). A finding is
reported in its minimal channel, so the levels above matter only for the values the kept levels leave
open: those with no proven disclosure there. A channel's join projects into each of its sub-channels',
so linked sets only shrink as views are added. Per connected component of the views, for the open values:

1. the component's own channel (the top: every view of it) is joined; a value with k or more linked
   values there has as many in every channel of the component and leaves the search;
2. the component without each view is joined (and, where the next level would be large, without each
   pair of views): a value with k values in every part of what is left is disclosed only by channels
   holding that view (meeting that pair), which prunes the candidates of every level;
3. the levels above the kept ones are walked upwards over those candidates only, each joined for the
   values of its group (the views holding the identifier restricted to them first: the work follows
   the values, not the views' sizes); a value leaves at the first level where a channel discloses it
   with nothing left to prove (``certainty.py``), every channel of that level joined.

Exact within a budget of joins (``_Tasks.search_budget``); past it a value the top discloses is
reported in a channel with no view to spare (:meth:`_Search.descend`), with the level the search
stopped at. Pure: polars and numpy over the state's rows, no I/O.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import polars as pl

from streamdetect.checks.linkage.frames import having
from streamdetect.checks.linkage.projections import _Projections
from streamdetect.checks.linkage.state import Flags, LinkageState
from streamdetect.checks.linkage.tasks import LinkageTask
from streamdetect.relational.closure import Channel, as_channels, components, view_graph
from streamdetect.relational.code_arrays import Codes, run_starts, stable_order
from streamdetect.relational.dictionary import CODE
from streamdetect.relational.linked_values import SharedWork, linked_values

#: ``(channels joined, channels joined and planned so far)``, after each join.
SearchProgress = Callable[[int, int], None]

#: A group of open codes: their component, the views every channel disclosing them holds, and pairs of
#: views of which such a channel holds one or both.
Group = tuple[frozenset[str], frozenset[str], frozenset[frozenset[str]]]


@dataclass
class Found:
    """What a search found: per (identifier code, channel) that discloses it, its linked values."""

    identifier: str
    codes: list[int] = field(default_factory=list)
    channels: list[Channel] = field(default_factory=list)
    values: list[list[int]] = field(default_factory=list)
    joined: int = 0
    #: codes whose search stopped at a level (the budget): no channel below it discloses them, but the
    #: levels from it up to the lowest found were not all searched
    unsettled: dict[int, int] = field(default_factory=dict)

    def add(self, channel: Channel, pairs: pl.DataFrame, sensitive: str, k: int) -> Codes:
        """Note the codes ``pairs`` (capped at k) links to fewer than k values; return them (in numpy: a
        polars group-by per join was a quarter of a search)."""
        codes = pairs.get_column(self.identifier).to_numpy()
        values = pairs.get_column(sensitive).to_numpy()
        order = stable_order(codes)
        codes, values = codes[order], values[order]
        starts = run_starts(codes)  # sorted: each code's run
        unique, counts = codes[starts], np.diff(np.append(starts, codes.size))
        few = counts < k
        for code, start, count in zip(unique[few].tolist(), starts[few].tolist(), counts[few].tolist(), strict=True):
            self.codes.append(code)
            self.channels.append(channel)
            self.values.append(values[start : start + count].tolist())
        disclosed: Codes = unique[few].astype(np.uint32)
        return disclosed

    def saturated(self, pairs: pl.DataFrame, k: int) -> Codes:
        """The codes ``pairs`` (capped at k) links to k values."""
        unique, counts = np.unique(pairs.get_column(self.identifier).to_numpy(), return_counts=True)
        saturated: Codes = unique[counts >= k].astype(np.uint32)
        return saturated


class _Beyond(_Projections):
    """The search of the levels above the kept ones."""

    @cached_property
    def _neighbours(self) -> dict[str, frozenset[str]]:
        """Per view, the views it shares an attribute with."""
        graph = view_graph(self.views)
        return {node: frozenset(graph.neighbors(node)) for node in graph.nodes}

    def _beyond(
        self,
        state: LinkageState,
        identifier: str,
        sensitive: str,
        active: Codes,
        *,
        without: frozenset[str] = frozenset(),
        proven: Callable[[Channel, Codes], Flags],
        progress: SearchProgress | None = None,
    ) -> Found:
        """Search the levels above the kept ones for the codes ``active`` (module docstring).

        ``proven(channel, codes)``: per code, whether its link in the channel needs nothing proven.
        """
        # What a top saturates stays saturated while rows only arrive: kept in the state between results
        # (dropped by a withdrawal), so a stream update searches only the values not settled there.
        search = _Search(
            self, state, identifier, sensitive, progress=progress, settled=None if without else state.settled
        )
        found = search.found
        if self.complete or not active.size:
            return found
        available = tuple(view for view in self.views if view.name not in without)
        first = len(self.levels) + 1
        for top in components(available, self.attribute_order):
            if top.level >= first and identifier in top.attributes and sensitive in top.attributes:
                search.open_component(top, active)
        last = len(self.views) if self.max_level is None else min(self.max_level, len(self.views))
        for level in range(first, last + 1):
            if not search.groups:
                break
            candidates = search.candidates(level, self.search_budget - found.joined)
            # What the joins of a level share (the views restricted to the same codes, factors of the same
            # inputs); dropped between levels, so memory follows one level's joins.
            search.shared, search.restricted = SharedWork(state.caps), {}
            resolved: list[Codes] = []
            search.planned = found.joined + len(candidates)
            for channel, codes in candidates:
                disclosed = search.join(channel, codes)
                if disclosed.size:
                    resolved.append(disclosed[proven(channel, disclosed)])
            if resolved:
                search.resolve(np.unique(np.concatenate(resolved)))
        if found.unsettled:
            search.descend(found.joined + self.descent_budget)
        return found


class _Search:
    """One search of the levels above the kept ones, for one (E, S): the codes still open, grouped by the
    views every channel disclosing them must hold."""

    def __init__(
        self,
        check: _Beyond,
        state: LinkageState,
        identifier: str,
        sensitive: str,
        *,
        progress: SearchProgress | None,
        settled: dict[tuple[str, str, frozenset[str]], Codes] | None,
    ) -> None:
        self.check = check
        self.state = state
        self.identifier = identifier
        self.sensitive = sensitive
        self.found = Found(identifier)
        self.shared = SharedWork(state.caps)
        self.restricted: dict[tuple[int, bytes], pl.DataFrame] = {}
        self.progress = progress
        #: per (E, S, component), the codes with k values in its top: done for good while rows only arrive
        #: (kept in the state between results; None when the search is not of every view)
        self.settled = settled
        #: the joins done and planned so far (the progress's total: it grows as the search finds work)
        self.planned = 0
        #: the open codes by group
        self.groups: dict[Group, Codes] = {}
        #: per group, the view sets grown from its required views so far (their size, the sets)
        self.grown: dict[Group, tuple[int, set[frozenset[str]]]] = {}
        #: the components whose pairs were joined
        self.paired: set[frozenset[str]] = set()
        #: per component joined whole, the codes it discloses
        self.top_disclosed: dict[frozenset[str], Codes] = {}

    def _linked(self, channel: Channel, codes: Codes) -> pl.DataFrame | None:
        """The capped sets of ``codes`` in ``channel`` from the rows present (None: the join is empty). The
        channel's views holding E are restricted to the codes first, once per level for joins that
        restrict a view alike."""
        self.found.joined += 1
        if self.progress is not None:
            self.progress(self.found.joined, max(self.found.joined, self.planned))
        check, identifier = self.check, self.identifier
        relations = {}
        for view, keep in check._needed(LinkageTask(channel, identifier, self.sensitive)).items():
            relation = check._projection(self.state, view, keep)
            if relation is None or relation.is_empty():
                return None
            if identifier in keep:
                key = (self.shared.identity(relation), codes.tobytes())
                if key not in self.restricted:
                    self.restricted[key] = having(relation, identifier, _series(identifier, codes))
                relation = self.restricted[key]
                if relation.is_empty():
                    return None
            relations[view] = relation
        pairs = linked_values(relations, identifier, self.sensitive, check.k, self.shared)
        return None if pairs.is_empty() else pairs

    def join(self, channel: Channel, codes: Codes) -> Codes:
        """Join ``channel`` for ``codes``; note and return the codes it discloses."""
        pairs = self._linked(channel, codes)
        return np.empty(0, np.uint32) if pairs is None else self.found.add(channel, pairs, self.sensitive, self.check.k)

    def _saturated(self, channel: Channel, codes: Codes) -> Codes:
        """The codes of ``codes`` linked to k or more values in ``channel`` (joined, not noted)."""
        pairs = self._linked(channel, codes)
        return np.empty(0, np.uint32) if pairs is None else self.found.saturated(pairs, self.check.k)

    def open_component(self, top: Channel, active: Codes) -> None:
        """Join the component's top for ``active``: a value with k values there has k in every channel of
        the component and is done; the others stay open, grouped by the views the component's channels
        disclosing them must hold: a view whose removal leaves the value with k values in what is left
        (every part of it holding E and S) is in every such channel."""
        check = self.check
        members = frozenset(top.views)
        active = np.intersect1d(active, self._present_in(members)).astype(np.uint32)
        settled_key = (self.identifier, self.sensitive, members)
        if self.settled is not None and settled_key in self.settled:
            active = np.setdiff1d(active, self.settled[settled_key]).astype(np.uint32)
        if not active.size:
            return
        if check.max_level is not None and top.level > check.max_level:
            self.groups[(members, frozenset(), frozenset())] = active
            return
        pairs = self._linked(top, active)
        if pairs is None:
            codes = active
        else:
            linked = pairs.get_column(self.identifier).to_numpy()
            disclosed = self.found.add(top, pairs, self.sensitive, check.k)
            self.top_disclosed[members] = disclosed
            codes = np.union1d(np.setdiff1d(active, linked), disclosed).astype(np.uint32)
            if self.settled is not None:
                done = np.setdiff1d(linked, disclosed).astype(np.uint32)
                earlier = self.settled.get(settled_key)
                self.settled[settled_key] = done if earlier is None else np.union1d(earlier, done)
        if not codes.size:
            return
        self.planned = self.found.joined + top.level
        required: dict[int, set[str]] = {int(code): set() for code in codes}
        inside = tuple(view for view in check.views if view.name in members)
        for view in top.views:
            rest = tuple(other for other in inside if other.name != view)
            parts = [
                part
                for part in components(rest, check.attribute_order)
                if self.identifier in part.attributes and self.sensitive in part.attributes
            ]
            saturated: Codes | None = None
            for part in parts:
                here = self._saturated(part, codes)
                saturated = here if saturated is None else np.intersect1d(saturated, here)
            for code in codes if saturated is None else saturated:
                required[int(code)].add(view)
        by_need: dict[frozenset[str], list[int]] = {}
        for code, views in required.items():
            by_need.setdefault(frozenset(views), []).append(code)
        for needed, grouped in by_need.items():
            self.groups[(members, needed, frozenset())] = np.array(sorted(grouped), dtype=np.uint32)

    def _present_in(self, members: frozenset[str]) -> Codes:
        """The codes of E in the rows present of the component's views holding it."""
        parts = []
        for view in self.check.views:
            if view.name in members and self.identifier in view.attributes:
                rows = self.state.seen.present(view.name)
                if rows is not None and rows.height:
                    parts.append(rows.get_column(self.identifier).drop_nulls().unique().to_numpy())
        return np.unique(np.concatenate(parts)).astype(np.uint32) if parts else np.empty(0, np.uint32)

    def _saturated_without(self, component: frozenset[str], left_out: frozenset[str], codes: Codes) -> Codes:
        """The codes linked to k or more values in every part of ``component`` without ``left_out`` that
        holds E and S (all of them when none does): every channel disclosing them meets ``left_out``."""
        check = self.check
        rest = tuple(view for view in check.views if view.name in component and view.name not in left_out)
        saturated = codes
        for part in components(rest, check.attribute_order):
            if self.identifier in part.attributes and self.sensitive in part.attributes:
                saturated = np.intersect1d(saturated, self._saturated(part, saturated))
                if not saturated.size:
                    break
        return saturated

    def _pair(self, component: frozenset[str]) -> None:
        """Regroup the component's open codes by the pairs of views their disclosing channels must meet:
        a pair whose removal leaves a code with k values everywhere (:meth:`_saturated_without`). A
        channel of few views must then hold one view of each such pair: the pairs are edges it covers."""
        self.paired.add(component)
        keys = [key for key in self.groups if key[0] == component]
        codes = np.unique(np.concatenate([self.groups[key] for key in keys]))
        needed = {int(code): key[1] for key in keys for code in self.groups[key].tolist()}
        clauses: dict[int, set[frozenset[str]]] = {int(code): set() for code in codes}
        views = sorted(component)
        self.planned = self.found.joined + len(views) * (len(views) - 1) // 2
        for i, first in enumerate(views):
            for second in views[i + 1 :]:
                pair = frozenset((first, second))
                for code in self._saturated_without(component, pair, codes).tolist():
                    if not pair & needed[code]:
                        clauses[code].add(pair)
        regrouped: dict[Group, list[int]] = {}
        for code in codes.tolist():
            regrouped.setdefault((component, needed[code], frozenset(clauses[code])), []).append(code)
        for key in keys:
            del self.groups[key]
        for key, grouped in regrouped.items():
            self.groups[key] = np.array(sorted(grouped), dtype=np.uint32)

    def candidates(self, level: int, budget: int) -> list[tuple[Channel, Codes]]:
        """The channels of ``level`` views some open code may be disclosed in (holding E, S and the views
        its group requires, not a component's top, joined first), each with those codes; sorted.

        Groups whose channels would take the joins past ``budget`` (cheapest groups first) leave the
        search unsettled at this level (:attr:`Found.unsettled`)."""
        check = self.check
        for key in list(self.groups):
            if key[0] not in self.paired and level < len(key[0]) and self._grow(key, level, check.pairs_from) is None:
                self._pair(key[0])
        wanted: dict[frozenset[str], list[Codes]] = {}
        costs = {key: len(self.grown[key][1]) if key in self.grown else 1 for key in self.groups}
        for key in sorted(self.groups, key=lambda key: (costs[key], sorted(key[1]), sorted(map(sorted, key[2])))):
            component = key[0]
            codes = self.groups[key]
            if level >= len(component):
                continue  # the top, joined already
            grown = self._grow(key, level, budget)
            if grown is None:
                # Past the budget a value the top discloses is reported there (or lower, :meth:`descend`);
                # one the top does not link has no channel to be reported in yet: its search goes on.
                reportable = np.intersect1d(codes, self.top_disclosed.get(component, codes[:0]))
                self.found.unsettled.update(dict.fromkeys(reportable.tolist(), level))
                codes = np.setdiff1d(codes, reportable).astype(np.uint32)
                if not codes.size:
                    del self.groups[key]
                    continue
                self.groups[key] = codes
                grown = self._grow(key, level, sys.maxsize)
                assert grown is not None
            fresh = sum(1 for views in grown if views not in wanted)
            budget -= fresh
            for views in grown:
                wanted.setdefault(views, []).append(codes)
        channels = as_channels(check.views, wanted, check.attribute_order)
        return [
            (channel, np.unique(np.concatenate(wanted[frozenset(channel.views)])))
            for channel in channels
            if self.identifier in channel.attributes and self.sensitive in channel.attributes
        ]

    def _grow(self, key: Group, level: int, budget: int) -> set[frozenset[str]] | None:
        """The connected view sets of ``level`` views inside the group's component holding its required
        views (and one view of each of its pairs): grown from them one neighbour at a time (every
        connected superset arises so: while a proper subset of it holds the required views, some view of
        it neighbours that subset). None when they, or the sets on the way, are more than ``budget``."""
        component, needed, pairs = key
        if len(needed) > level:
            return set()
        if pairs:
            return self._covering(key, level, budget)
        if key not in self.grown:
            first = len(self.check.levels)
            if needed or first < 1:
                self.grown[key] = (len(needed), {needed} if needed else set())
            else:
                self.grown[key] = (first, {views for views in self.check._kept[1] if views <= component})
        size, sets = self.grown[key]
        neighbours = self.check._neighbours
        while size < level:
            grown: set[frozenset[str]] = set()
            for views in sets:
                for neighbour in frozenset().union(*(neighbours[member] for member in views)) - views:
                    if neighbour in component:
                        grown.add(views | {neighbour})
                if len(grown) > budget:
                    return None
            sets = grown
            size += 1
            self.grown[key] = (size, sets)
        connected = {views for views in sets if _connected(neighbours, views)}
        return connected if len(connected) <= budget else None

    def _covering(self, key: Group, level: int, budget: int) -> set[frozenset[str]] | None:
        """:meth:`_grow` for a group with pairs: the sets of at most ``level`` views holding the required
        views and one of each pair (branching on the first pair not met: every such set contains one
        found so), each grown to ``level`` views as :meth:`_grow` grows."""
        component, needed, pairs = key
        ordered = sorted(pairs, key=sorted)
        covers: set[frozenset[str]] = set()

        def branch(chosen: frozenset[str]) -> None:
            unmet = next((pair for pair in ordered if not pair & chosen), None)
            if unmet is None:
                covers.add(chosen)
            elif len(chosen) < level:
                for view in sorted(unmet):
                    branch(chosen | {view})

        branch(needed)
        found: set[frozenset[str]] = set()
        for cover in covers:
            grown = self._grow((component, cover, frozenset()), level, budget - len(found))
            if grown is None:
                return None
            found |= grown
            if len(found) > budget:
                return None
        return found

    def descend(self, limit: int) -> None:
        """For the codes whose search stopped, a channel with no view to spare instead of the top: views
        taken out one at a time while a part of what is left (holding E and S) still discloses them,
        until ``limit`` joins. One pass suffices: a view that could not be taken out cannot be later (a
        part of a smaller channel without it is a sub-channel of a part without it now)."""
        check = self.check
        kept = len(check.levels)
        unsettled = np.array(sorted(self.found.unsettled), dtype=np.uint32)
        for members, disclosed in self.top_disclosed.items():
            at: dict[frozenset[str], Codes] = {members: np.intersect1d(unsettled, disclosed)}
            for view in sorted(members):
                moved: dict[frozenset[str], list[Codes]] = {}
                for current, codes in at.items():
                    left = codes
                    if view in current and codes.size and self.found.joined < limit:
                        rest = tuple(v for v in check.views if v.name in current and v.name != view)
                        for part in components(rest, check.attribute_order):
                            if part.level <= kept or not left.size:
                                continue
                            if self.identifier not in part.attributes or self.sensitive not in part.attributes:
                                continue
                            pairs = self._linked(part, left)
                            if pairs is None:
                                continue
                            linked = np.unique(pairs.get_column(self.identifier).to_numpy())
                            still = np.setdiff1d(linked, self.found.saturated(pairs, check.k)).astype(np.uint32)
                            moved.setdefault(frozenset(part.views), []).append(still)
                            left = np.setdiff1d(left, still).astype(np.uint32)
                    moved.setdefault(current, []).append(left)
                at = {views: np.unique(np.concatenate(parts)).astype(np.uint32) for views, parts in moved.items()}
                at = {views: codes for views, codes in at.items() if codes.size}
            for views, codes in at.items():
                if views != members:
                    self.join(as_channels(check.views, [views], check.attribute_order)[0], codes)

    def resolve(self, done: Codes) -> None:
        """Close the codes ``done`` (disclosed with nothing to prove at the level just searched)."""
        self.groups = {key: left for key, codes in self.groups.items() if (left := np.setdiff1d(codes, done)).size}


def _connected(neighbours: dict[str, frozenset[str]], views: frozenset[str]) -> bool:
    """Whether ``views`` are connected through shared attributes."""
    start = next(iter(views))
    reached = {start}
    frontier = [start]
    while frontier:
        for other in neighbours[frontier.pop()] & views:
            if other not in reached:
                reached.add(other)
                frontier.append(other)
    return len(reached) == len(views)


def _series(identifier: str, codes: Codes) -> pl.Series:
    return pl.Series(identifier, codes, dtype=CODE)
