"""k-loose associations (De Capitani di Vimercati et al. 2010, section 5) against brute force from the
definitions: every grouping the greedy makes is k-loose (Definition 5.4) with groups of at least k_l and
k_r rows (Definition 5.1) and the fewest left groups; the verifier agrees with the definition on random
groupings; suppression happens only when a class is too large or no bucket could take a row."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from streamdetect.remediation.loose import Grouping, alike_keys, greedy_grouping, verify

LEFT = ("A", "B")
RIGHT = ("C", "D")


@st.composite
def instances(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[tuple[str, ...]], int, int]:
    n = draw(st.integers(1, 40))
    domain = draw(st.integers(2, 12))
    rows = [{a: draw(st.integers(0, domain)) for a in (*LEFT, *RIGHT)} for _ in range(n)]
    constraints = draw(
        st.lists(
            st.tuples(st.sampled_from([("A",), ("B",), ("A", "B")]), st.sampled_from([("C",), ("D",), ("C", "D")])).map(
                lambda pair: pair[0] + pair[1]
            ),
            min_size=1,
            max_size=3,
            unique=True,
        )
    )
    return rows, constraints, draw(st.integers(1, 3)), draw(st.integers(1, 3))


def _codes(rows: list[dict[str, Any]], attributes: tuple[str, ...]) -> list[int]:
    index: dict[tuple[Any, ...], int] = {}
    return [index.setdefault(tuple(row[a] for a in attributes), len(index)) for row in rows]


def _keys(rows: list[dict[str, Any]], constraints: list[tuple[str, ...]]) -> tuple[list[Any], list[Any]]:
    left = alike_keys([_codes(rows, tuple(a for a in c if a in LEFT)) for c in constraints])
    right = alike_keys([_codes(rows, tuple(a for a in c if a in RIGHT)) for c in constraints])
    return left, right


def _alike(
    rows: list[dict[str, Any]], i: int, j: int, side: tuple[str, ...], constraints: list[tuple[str, ...]]
) -> bool:
    """Definition 5.3: equal on the side's attributes of some constraint the fragments cover."""
    return any(all(rows[i][a] == rows[j][a] for a in c if a in side) for c in constraints)


def _k_loose(rows: list[dict[str, Any]], constraints: list[tuple[str, ...]], grouping: Grouping, k: int) -> bool:
    """Definitions 5.1 and 5.4, straight from the text."""
    kept = [i for i in range(len(rows)) if grouping.left[i] is not None]
    for side, groups, least in (("l", grouping.left, grouping.k_left), ("r", grouping.right, grouping.k_right)):
        for g in {groups[i] for i in kept}:
            if sum(1 for i in kept if groups[i] == g) < least:
                return False
        del side
    pairs = {(grouping.left[i], grouping.right[i]) for i in kept}
    for mine, theirs, side in ((grouping.left, grouping.right, RIGHT), (grouping.right, grouping.left, LEFT)):
        for g in {mine[i] for i in kept}:
            partners = {
                h
                for (a, b) in pairs
                for h in ([b] if mine is grouping.left else [a])
                if (a if mine is grouping.left else b) == g
            }
            t = [i for i in kept if theirs[i] in partners]
            if len(t) < k:
                return False
            if any(_alike(rows, i, j, side, constraints) for x, i in enumerate(t) for j in t[x + 1 :]):
                return False
    return True


@settings(max_examples=300, deadline=None)
@given(instances())
def test_every_grouping_made_is_k_loose(instance: tuple[list[dict[str, Any]], list[tuple[str, ...]], int, int]) -> None:
    rows, constraints, k_left, k_right = instance
    left, right = _keys(rows, constraints)
    k = k_left * k_right
    grouping = greedy_grouping(left, right, k_left, k_right)
    kept = [i for i in range(len(rows)) if grouping.left[i] is not None]
    assert {i for i, _ in grouping.suppressed} == set(range(len(rows))) - set(kept)
    assert all((grouping.left[i] is None) == (grouping.right[i] is None) for i in range(len(rows)))
    assert _k_loose(rows, constraints, grouping, k)
    assert verify(grouping, left, right, k) == []
    if kept:
        assert len({grouping.left[i] for i in kept}) == len(kept) // k_left  # minimal on the left
    distinct = all(
        not _alike(rows, i, j, LEFT, constraints) and not _alike(rows, i, j, RIGHT, constraints)
        for i in range(len(rows))
        for j in range(i + 1, len(rows))
    )
    if distinct:  # nothing alike: only what cannot fill a group is suppressed
        buckets = len(rows) // k
        extra = len(rows) - buckets * k
        expected = len(rows) if buckets == 0 else extra - min(extra // k_left, buckets) * k_left
        assert len(grouping.suppressed) == expected


@settings(max_examples=300, deadline=None)
@given(instances(), st.randoms(use_true_random=False))
def test_the_verifier_agrees_with_the_definition(
    instance: tuple[list[dict[str, Any]], list[tuple[str, ...]], int, int], rng: random.Random
) -> None:
    rows, constraints, k_left, k_right = instance
    left, right = _keys(rows, constraints)
    n = len(rows)
    groups_l, groups_r = max(1, n // k_left), max(1, n // k_right)
    grouping = Grouping(
        tuple(rng.randrange(groups_l) for _ in range(n)),
        tuple(rng.randrange(groups_r) for _ in range(n)),
        k_left,
        k_right,
    )
    k = rng.randint(1, k_left * k_right)
    assert (verify(grouping, left, right, k) == []) == _k_loose(rows, constraints, grouping, k)
