"""The linkage check's tasks: one per (channel, identifier attribute, sensitive attribute) of the
leveled closure, and the relations between them (which channels dominate which, what a task joins on).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from streamdetect.checks.certainty import SelectionProof
from streamdetect.checks.linkage.state import (
    TaskKey,
)
from streamdetect.model.predicates import Predicate
from streamdetect.model.topology import ViewDefinition
from streamdetect.relational import channel_lattice as lattice
from streamdetect.relational.closure import Channel, iter_levels


@dataclass(frozen=True)
class LinkageTask:
    """One (channel, identifier attribute, sensitive attribute) whose linked sets the state keeps."""

    channel: Channel
    identifier: str
    sensitive: str

    @property
    def key(self) -> TaskKey:
        return (self.channel.views, self.identifier, self.sensitive)


Progress = Callable[[int, int], None]


#: How many tasks the check keeps incremental sets for: whole levels of the closure from the bottom, as
#: long as they fit (always the first two). The levels above are searched when a result is asked, for
#: the identifier values they can still change (``checks/linkage/beyond.py``). BP's whole closure is 75.
KEPT_TASKS = 128

#: How many channels a search of the levels above the kept ones may join per (E, S) and result: a value
#: whose search would take more is reported with the lowest channel found and the level the search
#: stopped at (``LinkageFinding.searched_below``).
SEARCH_BUDGET = 20_000

#: How many more it may join to find, for the values a search stopped for, a channel with no view to
#: spare (reported instead of their component's top).
DESCENT_BUDGET = 5_000

#: A search whose open values of a component would be joined in more channels than this at the next
#: level first finds the pairs of views their disclosing channels must meet (``beyond.py``).
PAIRS_FROM = 2_000

#: A task whose step adds to several of its views computes the whole sets of the codes it can change
#: (live ones, or unsaturated ones) instead of one delta join per view, when they are at most this many.
FEW_CODES = 64


@dataclass(frozen=True)
class _Tasks:
    """The check's configuration (its fields: :class:`~streamdetect.checks.linkage.check.LinkageCheck`),
    the tasks of the closure and their relations (cached per configuration)."""

    views: tuple[ViewDefinition, ...]
    identifiers: tuple[str, ...]
    sensitive: tuple[str, ...]
    attribute_order: tuple[str, ...]
    k: int = 2
    max_level: int | None = None
    few_codes: int = FEW_CODES
    kept_tasks: int = KEPT_TASKS
    search_budget: int = SEARCH_BUDGET
    descent_budget: int = DESCENT_BUDGET
    pairs_from: int = PAIRS_FROM

    @cached_property
    def _kept(self) -> tuple[list[list[Channel]], set[frozenset[str]], bool]:
        """The levels kept (whole levels from the bottom, at least two, while their tasks fit in
        :attr:`kept_tasks`), the view sets of the last one (the next levels grow from them), and whether
        they are the whole closure."""
        levels: list[list[Channel]] = []
        last: set[frozenset[str]] = set()
        kept = 0
        for channels, sets in iter_levels(self.views, self.attribute_order, self.max_level):
            count = sum(1 for channel in channels for _ in self._pairs_of(channel))
            if len(levels) >= 2 and kept + count > self.kept_tasks:
                return levels, last, False
            levels.append(channels)
            last = sets
            kept += count
        return levels, last, True

    @property
    def levels(self) -> list[list[Channel]]:
        """The levels of the closure whose tasks the check keeps (every level when they fit)."""
        return self._kept[0]

    @property
    def complete(self) -> bool:
        """Whether the kept levels are the whole closure (else :meth:`_beyond` searches the rest)."""
        return self._kept[2]

    def _pairs_of(self, channel: Channel) -> list[tuple[str, str]]:
        """The (E, S) pairs whose attributes the channel holds."""
        return [
            (identifier, sensitive)
            for identifier in self.identifiers
            if identifier in channel.attributes
            for sensitive in self.sensitive
            if sensitive in channel.attributes
        ]

    @cached_property
    def tasks(self) -> tuple[LinkageTask, ...]:
        """Every (channel, E, S) with both attributes in the channel's schema, by level."""
        return tuple(
            LinkageTask(channel, identifier, sensitive)
            for level in self.levels
            for channel in level
            for identifier, sensitive in self._pairs_of(channel)
        )

    @cached_property
    def _proof(self) -> SelectionProof:
        return SelectionProof(self.views)

    @cached_property
    def _open_selections(self) -> dict[TaskKey, tuple[Predicate, ...]]:
        """Per task, the selections a value's facts must prove for the link to be certain (certainty.py)."""
        return {task.key: self._proof.open_selections(task.channel.views, task.identifier) for task in self.tasks}

    @cached_property
    def _proving(self) -> tuple[str, ...]:
        """The identifiers some of whose tasks have selections to prove (certainty.py)."""
        return tuple(
            e for e in self.identifiers if any(self._open_selections[t.key] for t in self.tasks if t.identifier == e)
        )

    @cached_property
    def _dominating(self) -> dict[TaskKey, tuple[TaskKey, ...]]:
        """Per task, the sub-tasks that decide which identifier values it must keep exact sets for.

        For a channel C' whose views are a proper subset of C's, the join over C projects into the join
        over C', so L_C(e) is a subset of L_C'(e). If e is not saturated in C' it is either absent there (and
        in C) or disclosed there, at a lower level; when C' has no selection to prove, that finding is
        certain and C can never be e's reported channel. So C needs exact sets only for the values
        saturated in every such C' (the *live* values); the maximal such C' suffice (saturated in C'
        implies saturated in every channel under it). Channels whose links need selections proven are
        left out: a higher channel may be the certain one there. O(tasks^2), once.
        """
        keys = [task.key for task in self.tasks]
        return lattice.dominating(keys, lambda key: not self._open_selections[key])

    @cached_property
    def _above(self) -> dict[TaskKey, tuple[TaskKey, ...]]:
        """Per task, the tasks of the same (E, S) over a proper superset of its views, by level."""
        return lattice.above([task.key for task in self.tasks])

    @cached_property
    def _tops(self) -> dict[TaskKey, tuple[TaskKey, ...]]:
        """Per task, the maximal tasks of :attr:`_above` (BP: the channel of all six views)."""
        return lattice.tops(self._above)

    @cached_property
    def _joined_on(self) -> dict[tuple[str, ...], tuple[str, ...]]:
        """Per kept channel, the attributes its natural join matches on (held by two or more of its views)."""
        return {channel.views: self._join_attributes(channel.views) for level in self.levels for channel in level}

    def _join_attributes(self, views: tuple[str, ...]) -> tuple[str, ...]:
        """The attributes the natural join of ``views`` matches on (held by two or more of them)."""
        counts: dict[str, int] = {}
        for view in self.views:
            if view.name in views:
                for attribute in view.attributes:
                    counts[attribute] = counts.get(attribute, 0) + 1
        return tuple(a for a in self.attribute_order if counts.get(a, 0) > 1)

    @cached_property
    def _by_key(self) -> dict[TaskKey, LinkageTask]:
        """The tasks by key."""
        return {task.key: task for task in self.tasks}

    def _needed(self, task: LinkageTask) -> dict[str, list[str]]:
        """Per view of the channel, the attributes the join needs: E, S and the join attributes."""
        joined = self._joined_on.get(task.channel.views) or self._join_attributes(task.channel.views)
        members = [view for view in self.views if view.name in task.channel.views]
        keep = {task.identifier, task.sensitive, *joined}
        return {view.name: [a for a in view.attributes if a in keep] for view in members}
