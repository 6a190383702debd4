"""The values each projection fact's capped set holds, kept in numpy (``held_values``): merging the pairs
a delta join found takes exactly those a set does not hold, the first found first, up to the cap."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from streamdetect.checks.k_anonymity.held_values import HeldValues

PF, T = "pf", "t"


@st.composite
def sets_and_found(draw: st.DrawFn) -> tuple[int, int, dict[int, list[int]], list[tuple[int, int]]]:
    cap = draw(st.integers(1, 4))
    height = draw(st.integers(1, 6))
    held = {
        pf: draw(st.lists(st.integers(0, 5), unique=True, max_size=cap)) for pf in range(height) if draw(st.booleans())
    }
    # Distinct pairs, as a delta join gives them; PFs may be new (the holder grew).
    grown = height + draw(st.integers(0, 2))
    found = draw(st.lists(st.tuples(st.integers(0, grown - 1), st.integers(0, 5)), unique=True, max_size=12))
    return cap, height, held, found


@given(sets_and_found())
def test_merge_takes_the_pairs_a_set_lacks_first_found_first_up_to_the_cap(
    case: tuple[int, int, dict[int, list[int]], list[tuple[int, int]]],
) -> None:
    cap, height, held, found = case
    pairs = pl.DataFrame([(pf, value) for pf, values in held.items() for value in values], schema=[PF, T], orient="row")
    kept = HeldValues.of(pairs, PF, T, cap, height)
    assert kept.counts.tolist() == [len(held.get(pf, [])) for pf in range(height)]
    grown = max([height - 1, *(pf for pf, _ in found)]) + 1
    kept.extend(grown)
    taken = kept.merge(
        np.array([pf for pf, _ in found], dtype=np.int64), np.array([v for _, v in found], dtype=np.int64)
    )

    # The definition: walk the pairs in order, take one when its set lacks it and has room.
    sets = {pf: list(held.get(pf, [])) for pf in range(grown)}
    expected = []
    for i, (pf, value) in enumerate(found):
        if value not in sets[pf] and len(sets[pf]) < cap:
            sets[pf].append(value)
            expected.append(i)
    assert taken.tolist() == expected
    assert kept.counts.tolist() == [len(sets[pf]) for pf in range(grown)]
    assert kept.values is not None
    assert [sorted(v for v in row if v >= 0) for row in kept.values.tolist()] == [
        sorted(sets[pf]) for pf in range(grown)
    ]


def test_large_caps_keep_the_counts_only() -> None:
    pairs = pl.DataFrame({PF: [0, 0, 2], T: [1, 2, 1]})
    kept = HeldValues.of(pairs, PF, T, 40, 3)
    assert kept.values is None
    assert kept.counts.tolist() == [2, 0, 1]
    kept.count(np.array([1, 1]))
    assert kept.counts.tolist() == [2, 2, 1]


@given(
    cap=st.integers(1, 3),
    steps=st.lists(
        st.tuples(
            st.integers(0, 40),  # PFs the holder grows by
            st.lists(st.tuples(st.integers(0, 200), st.integers(0, 4)), unique=True, max_size=10),  # pairs found
            st.lists(st.integers(0, 200), max_size=3),  # PFs whose sets a withdrawal empties
        ),
        max_size=8,
    ),
)
def test_sets_grown_batch_after_batch_hold_what_the_pairs_found_give(
    cap: int, steps: list[tuple[int, list[tuple[int, int]], list[int]]]
) -> None:
    """The holder grows batch after batch (the arrays grow in buffers with room, in place), its sets take
    the pairs found and lose those withdrawn: at every step what each set holds, by the definition."""
    kept = HeldValues.of(None, PF, T, cap, 0)
    sets: dict[int, list[int]] = {}
    height = 0
    for grow, found, cleared in steps:
        height += grow
        kept.extend(height)
        sets.update({pf: sets.get(pf, []) for pf in range(height)})
        pairs = [(pf % height, value) for pf, value in found] if height else []
        pairs = list(dict.fromkeys(pairs))  # distinct, as a delta join gives them
        kept.merge(np.array([pf for pf, _ in pairs], dtype=np.int64), np.array([v for _, v in pairs], dtype=np.int64))
        for pf, value in pairs:
            if value not in sets[pf] and len(sets[pf]) < cap:
                sets[pf].append(value)
        gone = sorted({pf % height for pf in cleared}) if height else []
        kept.clear(np.array(gone, dtype=np.int64))
        for pf in gone:
            sets[pf] = []
        assert kept.counts.tolist() == [len(sets[pf]) for pf in range(height)]
        assert kept.values is not None
        assert [sorted(v for v in row if v >= 0) for row in kept.values.tolist()] == [
            sorted(sets[pf]) for pf in range(height)
        ]
