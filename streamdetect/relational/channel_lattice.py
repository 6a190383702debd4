"""The channels of one (identifier, sensitive) pair ordered by their views: which lie under which.

A channel C' whose views are a proper subset of C's links every identifier value to a superset of what
C links it to (the join over C projects into the join over C'). The linkage check reads this order two
ways (docs/design.md, "Live values only" and "Settled from the top down"): a value needs an exact set
in C only if it is saturated in every channel under C that has no selection to prove (the *dominating*
ones, of which the maximal suffice), and a value saturated in a channel is saturated in every channel
between it and any channel under it.

Keys are (channel views, identifier, sensitive); keys of different pairs are never compared. Each
function is O(keys^2) per pair (done once per check). Pure: no I/O, no polars.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

Key = tuple[tuple[str, ...], str, str]


def _under(low: Key, high: Key) -> bool:
    """Whether ``low`` is a channel of the same pair over a proper subset of ``high``'s views."""
    return low[1:] == high[1:] and set(low[0]) < set(high[0])


def _maximal(keys: Sequence[Key]) -> tuple[Key, ...]:
    """The keys no other key lies above."""
    return tuple(key for key in keys if not any(_under(key, other) for other in keys))


def dominating(keys: Sequence[Key], proven: Callable[[Key], bool]) -> dict[Key, tuple[Key, ...]]:
    """Per key, the maximal keys under it whose findings need nothing proven (``proven(key)``): the
    channels whose saturation decides which values it must keep exact sets for."""
    return {key: _maximal([other for other in keys if _under(other, key) and proven(other)]) for key in keys}


def above(keys: Sequence[Key]) -> dict[Key, tuple[Key, ...]]:
    """Per key, the keys over it, in the order given (by level when ``keys`` are)."""
    return {key: tuple(other for other in keys if _under(key, other)) for key in keys}


def tops(over: dict[Key, tuple[Key, ...]]) -> dict[Key, tuple[Key, ...]]:
    """Per key, the maximal keys of :func:`above`'s result (on BP the channel of all six views)."""
    return {key: _maximal(higher) for key, higher in over.items()}


def between(high: Key, over: Sequence[Key]) -> list[Key]:
    """The keys of ``over`` (those above some key) that lie under ``high``."""
    return [key for key in over if _under(key, high)]


def under_all(over: Sequence[Key], failed: Sequence[Key]) -> list[Key]:
    """The maximal keys of ``over`` that lie under one of ``failed`` (the next probes down)."""
    candidates = [key for key in over if any(_under(key, high) for high in failed)]
    return list(_maximal(candidates))
