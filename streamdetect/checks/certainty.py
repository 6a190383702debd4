"""Certain or possible: does a channel's link hold in every table instance that yields the views?

A linkage finding says: in channel C's natural join, identifier value e is linked to fewer than k values
L of sensitive attribute S. It is *certain* when, in every instance I of the private table that yields
the published views (each view equals PROJECT_attrs SELECT_where I, set semantics) and in which E is a
key (an explicit identifier names one person), the tuple t of e has t[S] in L. It is *possible* otherwise.

Proof used here (sound, not complete). If t satisfies the selection of every view u of C, then t's
projection onto u is a row of u for each u, those rows join, and (e, t[S]) is in C's join: t[S] is in L
(L is complete below k). So C is *proven* for e when each view's selection is

* absent (a projection-only view);
* the selection of a view w holding E in which e appears (t's own row of w passed it); or
* true on what the views holding E publish of t (SQL's three-valued logic: unknown is not true).

Projection-only channels, and channels whose views share one selection, are proven for every e without
looking at values. Nothing more is claimed: a channel that joins an unselected view with
``where diagnosis IN ('HIV', 'Cancer')`` links e to a serious diagnosis that e may not have.
(The design notes, section 1: with selections "a natural join of views with different selections can
link rows that no table instance links"; Yao, Wang & Jajodia 2005, section 5.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from streamdetect.model.predicates import Predicate, evaluate
from streamdetect.model.topology import ViewDefinition

#: A value some attribute of t is published with; ``_CONFLICT`` when rows of e disagree (E not a key there).
_CONFLICT = object()


@dataclass
class IdentifierFacts:
    """What the views holding E publish about the tuple of one identifier value.

    ``values``: attribute -> value of t (or a conflict marker); ``selections``: the selections t is known
    to satisfy (those of the views holding E in which e appears).
    """

    values: dict[str, Any] = field(default_factory=dict)
    selections: set[Predicate] = field(default_factory=set)

    def add_row(self, row: Mapping[str, Any], where: Predicate | None) -> None:
        """Record one published row of e, from a view with selection ``where``."""
        for attribute, value in row.items():
            known = self.values.setdefault(attribute, value)
            if known is not _CONFLICT and known != value:
                self.values[attribute] = _CONFLICT
        if where is not None:
            self.selections.add(where)

    def satisfies(self, selection: Predicate) -> bool:
        """Whether t certainly satisfies ``selection``. O(size of the selection)."""
        if selection in self.selections:
            return True
        known = {a: v for a, v in self.values.items() if v is not _CONFLICT}
        return evaluate(selection, known) is True


@dataclass(frozen=True)
class SelectionProof:
    """Decides, per channel and identifier value, whether the channel's link is proven (module docstring)."""

    views: tuple[ViewDefinition, ...]

    def open_selections(self, channel: Iterable[str], identifier: str) -> tuple[Predicate, ...]:
        """The selections of ``channel``'s views that a value's facts must prove; () when proven for all.

        A selection shared with a view of the channel that holds ``identifier`` is proven for every value
        the join links (its row of that view passed the selection). O(views).
        """
        members = [view for view in self.views if view.name in set(channel)]
        closed = {view.where for view in members if identifier in view.attributes}
        return tuple(dict.fromkeys(v.where for v in members if v.where is not None and v.where not in closed))

    def holders(self, identifier: str) -> tuple[ViewDefinition, ...]:
        """The views that publish ``identifier``: the ones whose rows say something about one value's tuple."""
        return tuple(view for view in self.views if identifier in view.attributes)

    @staticmethod
    def proven(facts: IdentifierFacts | None, selections: Sequence[Predicate]) -> bool:
        """Whether every selection is proven from ``facts``. O(total size of the selections)."""
        if not selections:
            return True
        return facts is not None and all(facts.satisfies(selection) for selection in selections)
