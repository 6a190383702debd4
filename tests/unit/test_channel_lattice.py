"""The order of one (identifier, sensitive) pair's channels by their views (relational/channel_lattice.py)."""

from __future__ import annotations

from streamdetect.relational import channel_lattice as lattice


def _key(*views: str, e: str = "E", s: str = "S") -> lattice.Key:
    return (tuple(views), e, s)


KEYS = [
    _key("a", "b"),
    _key("a", "c"),
    _key("a", "b", "c"),
    _key("a", "b", "d"),
    _key("a", "b", "c", "d"),
    _key("a", "b", s="T"),  # another pair: never related to the others
]


def test_dominating_keeps_the_maximal_proven_channels_under_each() -> None:
    everything = lattice.dominating(KEYS, lambda key: True)
    assert everything[_key("a", "b", "c")] == (_key("a", "b"), _key("a", "c"))
    assert everything[_key("a", "b", "c", "d")] == (_key("a", "b", "c"), _key("a", "b", "d"))
    assert everything[_key("a", "b")] == ()
    assert everything[_key("a", "b", s="T")] == ()
    # A channel with selections to prove does not dominate; the ones under it take its place.
    unproven = lattice.dominating(KEYS, lambda key: key != _key("a", "b", "c"))
    assert unproven[_key("a", "b", "c", "d")] == (_key("a", "c"), _key("a", "b", "d"))


def test_above_tops_between_and_the_next_probes_down() -> None:
    over = lattice.above(KEYS)
    assert over[_key("a", "b")] == (_key("a", "b", "c"), _key("a", "b", "d"), _key("a", "b", "c", "d"))
    tops = lattice.tops(over)
    assert tops[_key("a", "b")] == (_key("a", "b", "c", "d"),)
    assert tops[_key("a", "b", "c", "d")] == ()
    above_ab = over[_key("a", "b")]
    assert lattice.between(_key("a", "b", "c", "d"), above_ab) == [_key("a", "b", "c"), _key("a", "b", "d")]
    assert lattice.under_all(above_ab, [_key("a", "b", "c", "d")]) == [_key("a", "b", "c"), _key("a", "b", "d")]
    assert lattice.under_all(above_ab, [_key("a", "b", "c")]) == []
