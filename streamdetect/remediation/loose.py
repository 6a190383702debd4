"""k-loose associations between two fragments (De Capitani di Vimercati et al., VLDB 2010, sections 5-6
and Appendix B).

Two fragments ``F_l`` and ``F_r`` of a correct fragmentation are published with a group column each and
the association ``A(G_l, G_r)``: one pair per table row, the groups of its two halves. A grouping puts
every left half in a group of at least ``k_l`` and every right half in one of at least ``k_r``; it is
minimal with ``floor(|s| / k_l)`` (``floor(|s| / k_r)``) groups (Definition 5.1). Two halves are *alike*
when they agree on the attributes of a constraint that the two fragments cover together (Definition
5.3). The association is *k-loose* (Definition 5.4) when, for every left group, the right halves of the
groups it is paired with are at least k and pairwise not alike, and symmetrically.

:func:`greedy_grouping` reads the paper's greedy algorithm (Appendix B: tuples placed one by one in
groups with room that keep Properties 5.1-5.3) through the construction of Theorem 5.3's proof (step 1):
rows are dealt, hardest first (those of the largest alike classes), into buckets of k rows none alike
on either side, and each bucket is laid out as a ``k_l`` x ``k_r`` grid, whose columns are left groups
and whose rows are right groups; such a minimal ``(k_l, k_r)``-grouping keeps the three properties by
construction, so it is ``k_l * k_r``-loose (Theorem 5.2). Placing halves one by one into groups (as
first written here) left the last rows with no group they could join: at 2,000 rows a few were lost each
round and at 20,000 every round failed. A value alike to more than ``|s| / k`` others makes any
grouping impossible (the proof of Theorem 5.3): those rows, and any no bucket can take, are suppressed
and named, and the dealing is redone without them.
:func:`verify` checks Definition 5.4 from the published grouping alone: it is how the proposal is
re-checked before it is offered, and what any recipient can run. :func:`exposure` gives the
probabilities of section 6.

Pure: a frame's codes in, integer groups out; the CLI reads the table and writes the fragments.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import polars as pl

#: A half's alike keys: one per constraint, (constraint index, code of its values on that constraint).
Keys = tuple[int, ...]


@dataclass(frozen=True)
class Grouping:
    """Left and right group of every row (None: suppressed), the rows suppressed with why, and the
    association (one pair per row kept)."""

    left: tuple[int | None, ...]
    right: tuple[int | None, ...]
    k_left: int
    k_right: int
    suppressed: tuple[tuple[int, str], ...] = ()


def split_k(k: int) -> tuple[int, int]:
    """A balanced ``(k_l, k_r)`` with ``k_l * k_r = k`` (the paper finds the product, not the split,
    drives utility: Appendix B, Figure 8): the largest divisor of k not above its square root."""
    k_left = max(d for d in range(1, math.isqrt(k) + 1) if k % d == 0)
    return k_left, k // k_left


def _key(constraint: int, code: int) -> int:
    return code * 1024 + constraint  # constraints number fewer than 1024 (checked by the caller)


def alike_keys(codes: Sequence[Sequence[int]], rows: int | None = None) -> list[Keys]:
    """Per row, its alike keys from per-constraint codes (``codes[j][i]``: row i's code of its values on
    constraint j's attributes in this fragment; equal codes, equal values). ``rows``: how many rows,
    when no constraint gives codes (then every half stands alone: no key)."""
    if len(codes) >= 1024:
        raise ValueError("more than 1,023 constraints cover the two fragments")
    count = len(codes[0]) if codes else rows or 0
    return [tuple(_key(j, column[i]) for j, column in enumerate(codes)) for i in range(count)]


def codes(frame: pl.DataFrame, columns: Sequence[str]) -> list[int]:
    """Per row, a code of its values on ``columns`` (equal values, equal codes; null is a value)."""
    return frame.select(pl.struct(list(columns)).rank("dense")).to_series().to_list()


def fragment_codes(
    frame: pl.DataFrame, left: Sequence[str], right: Sequence[str], constraints: Sequence[Sequence[str]]
) -> tuple[list[list[int]], list[list[int]]]:
    """Per constraint the two fragments cover, each row's code on the constraint's left attributes and
    on its right ones (what :func:`alike_keys` and :func:`exposure` read)."""
    return (
        [codes(frame, [a for a in c if a in left]) for c in constraints],
        [codes(frame, [a for a in c if a in right]) for c in constraints],
    )


def _bucket(
    order: Sequence[int], left_keys: Sequence[Keys], right_keys: Sequence[Keys], capacities: Sequence[int]
) -> tuple[list[list[int]], list[int]]:
    """Deal rows (in ``order``) to buckets of the given capacities, each row to the next bucket with room
    that holds no row alike to it on either side (round robin from after the last bucket used); the
    buckets, and the rows no bucket could take. About O(rows * constraints) when classes are small
    against the number of buckets."""
    count = len(capacities)
    members: list[list[int]] = [[] for _ in range(count)]
    seen_left: list[set[int]] = [set() for _ in range(count)]
    seen_right: list[set[int]] = [set() for _ in range(count)]
    failed: list[int] = []
    pointer = 0
    for row in order:
        lk, rk = left_keys[row], right_keys[row]
        for step in range(count):
            b = (pointer + step) % count
            if len(members[b]) < capacities[b] and seen_left[b].isdisjoint(lk) and seen_right[b].isdisjoint(rk):
                members[b].append(row)
                seen_left[b].update(lk)
                seen_right[b].update(rk)
                pointer = (b + 1) % count
                break
        else:
            failed.append(row)
    if failed:
        failed = _repair(failed, members, (seen_left, seen_right), capacities, (left_keys, right_keys))
    return members, failed


def _repair(
    failed: list[int],
    members: list[list[int]],
    seen: tuple[list[set[int]], list[set[int]]],
    capacities: Sequence[int],
    keys: tuple[Sequence[Keys], Sequence[Keys]],
    *,
    chain: int = 64,
) -> list[int]:
    """Place rows the dealing could not, by ejection chains: the row goes to a bucket with room where
    nothing is alike to it, or else replaces the one row alike to it in some bucket, and that row is
    placed the same way, up to ``chain`` moves (a row just moved is not ejected again). Buckets are
    small (k rows): their key sets are rebuilt on a move. Deterministic (the buckets are tried in a
    rotation set by the row and the step). The rows
    still without a bucket. O(failed * chain * buckets * k * constraints) at worst."""
    seen_left, seen_right = seen
    left_keys, right_keys = keys
    count = len(members)

    def conflicts(row: int, bucket: int) -> list[int]:
        return [
            m
            for m in members[bucket]
            if not set(left_keys[m]).isdisjoint(left_keys[row]) or not set(right_keys[m]).isdisjoint(right_keys[row])
        ]

    def rebuild(bucket: int) -> None:
        seen_left[bucket] = {key for m in members[bucket] for key in left_keys[m]}
        seen_right[bucket] = {key for m in members[bucket] for key in right_keys[m]}

    still: list[int] = []
    for start in failed:
        row, moved, placed = start, {start}, False
        for step in range(chain):
            open_bucket = next(
                (
                    b
                    for b in range(count)
                    if len(members[b]) < capacities[b]
                    and seen_left[b].isdisjoint(left_keys[row])
                    and seen_right[b].isdisjoint(right_keys[row])
                ),
                None,
            )
            if open_bucket is not None:
                members[open_bucket].append(row)
                rebuild(open_bucket)
                placed = True
                break
            if _swap_into_room(row, members, (seen_left, seen_right), capacities, keys, rebuild):
                placed = True
                break
            # A bucket where exactly one row is alike to this one, and that row was not just moved.
            swap = None
            for offset in range(count):
                b = (start + step + offset) % count
                alike = conflicts(row, b)
                if len(alike) == 1 and alike[0] not in moved:
                    swap = (b, alike[0])
                    break
            if swap is None:
                break
            b, ejected = swap
            members[b].remove(ejected)
            members[b].append(row)
            rebuild(b)
            moved.add(ejected)
            row = ejected
        if not placed:
            still.append(row)  # the row left in hand: the start row sits in a bucket now, or is this one
    return still


def _swap_into_room(  # noqa: PLR0917 -- the dealing's state, passed whole
    row: int,
    members: list[list[int]],
    seen: tuple[list[set[int]], list[set[int]]],
    capacities: Sequence[int],
    keys: tuple[Sequence[Keys], Sequence[Keys]],
    rebuild: Callable[[int], None],
) -> bool:
    """One swap: a row z of some bucket c moves to a bucket b with room where nothing is alike to z, and
    ``row`` takes z's place in c (nothing left in c alike to it). Whether it was done."""
    seen_left, seen_right = seen
    left_keys, right_keys = keys
    for b in (b for b in range(len(members)) if len(members[b]) < capacities[b]):
        for c in range(len(members)):
            if c == b:
                continue
            for z in members[c]:
                if not (seen_left[b].isdisjoint(left_keys[z]) and seen_right[b].isdisjoint(right_keys[z])):
                    continue
                others = [m for m in members[c] if m != z]
                if all(
                    set(left_keys[m]).isdisjoint(left_keys[row]) and set(right_keys[m]).isdisjoint(right_keys[row])
                    for m in others
                ):
                    members[c].remove(z)
                    members[c].append(row)
                    members[b].append(z)
                    rebuild(b)
                    rebuild(c)
                    return True
    return False


def _layout(buckets: Sequence[Sequence[int]], k_left: int) -> dict[int, tuple[int, int]]:
    """Each bucket of ``k_left * m`` pairwise non-alike rows as a ``k_left`` x ``m`` grid (the proof of
    Theorem 5.3, step 1): column b is a left group (k_left rows), grid row a a right group (m rows), and
    the row at (a, b) pairs them, so no pair repeats (5.2), no group holds alike halves (5.1) and every
    group's T is the whole bucket, alike to nothing in it (5.3)."""
    placed: dict[int, tuple[int, int]] = {}
    next_left = next_right = 0
    for bucket in buckets:
        for position, row in enumerate(bucket):
            placed[row] = (next_left + position // k_left, next_right + position % k_left)
        next_left += len(bucket) // k_left
        next_right += k_left
    return placed


def greedy_grouping(
    left_keys: Sequence[Keys], right_keys: Sequence[Keys], k_left: int, k_right: int, *, rounds: int = 8
) -> Grouping:
    """A minimal ``(k_left, k_right)``-grouping satisfying Properties 5.1-5.3 (so ``k_left * k_right``-loose,
    Theorem 5.2) of the rows not suppressed. Rows whose alike class on one side exceeds ``rows / k``
    (Theorem 5.3, step 2a) are suppressed first (the class's first rows are kept). The others are dealt,
    hardest first, into ``rows // k`` buckets of k pairwise non-alike rows (some widened by whole left
    groups to take the remainder), and each bucket is laid out as a grid (:func:`_layout`). Rows no
    bucket can take are suppressed and the dealing redone, up to ``rounds`` times; fewer than ``k_left``
    rows beyond the buckets are suppressed too (they cannot fill a left group). About
    O(rows * constraints) per round when alike classes are small against the number of buckets."""
    n = len(left_keys)
    k = k_left * k_right
    suppressed: dict[int, str] = {}
    kept = list(range(n))
    while True:  # the bound shrinks as rows go: repeat until no class exceeds it
        limit = len(kept) // k
        dropped = _over_limit(kept, left_keys, right_keys, limit)
        if not dropped:
            break
        for row, why in dropped.items():
            suppressed[row] = why
        kept = [row for row in kept if row not in dropped]
    placed: dict[int, tuple[int, int]] = {}
    for attempt in range(rounds + 1):
        count = len(kept) // k
        if count == 0:
            for row in kept:
                suppressed[row] = f"fewer than k = {k} rows left to group"
            break
        # Rows beyond whole buckets widen buckets by whole left groups (k_left rows each); fewer than
        # k_left left over cannot form a group of their own.
        widened = min((len(kept) - count * k) // k_left, count)
        capacities = [k + k_left if b < widened else k for b in range(count)]
        # Hardest first: rows of the largest alike classes, then in table order.
        sizes = _class_sizes(kept, left_keys, right_keys)
        order = sorted(kept, key=lambda row: (-sizes[row], row))
        take = sum(capacities)
        buckets, failed = _bucket(order[:take], left_keys, right_keys, capacities)
        if not failed:
            for row in order[take:]:
                suppressed[row] = f"the table's size leaves fewer than k_l = {k_left} rows for another left group"
            placed = _layout(buckets, k_left)
            break
        if attempt == rounds:  # give up: nothing is offered that is not verified
            for row in kept:
                suppressed[row] = "no grouping found"
            break
        # Rows no bucket could take (every bucket with room holds one alike): suppress them, deal again.
        for row in failed:
            suppressed[row] = "every bucket with room holds a row alike to it (greedy)"
        gone = set(failed)
        kept = [row for row in kept if row not in gone]
    return Grouping(
        left=tuple(placed[row][0] if row in placed else None for row in range(n)),
        right=tuple(placed[row][1] if row in placed else None for row in range(n)),
        k_left=k_left,
        k_right=k_right,
        suppressed=tuple(sorted(suppressed.items())),
    )


def _class_sizes(rows: Sequence[int], left_keys: Sequence[Keys], right_keys: Sequence[Keys]) -> dict[int, int]:
    """Per row, the size of its largest alike class (keys of the two sides counted apart)."""
    left: Counter[int] = Counter(key for row in rows for key in left_keys[row])
    right: Counter[int] = Counter(key for row in rows for key in right_keys[row])
    return {
        row: max([left[key] for key in left_keys[row]] + [right[key] for key in right_keys[row]], default=1)
        for row in rows
    }


def _over_limit(
    rows: Sequence[int], left_keys: Sequence[Keys], right_keys: Sequence[Keys], limit: int
) -> dict[int, str]:
    """Rows beyond the first ``limit`` of an alike class (on either side; keys of the sides counted apart)."""
    seen_left: Counter[int] = Counter()
    seen_right: Counter[int] = Counter()
    dropped: dict[int, str] = {}
    for row in rows:
        if any(seen_left[key] >= limit for key in left_keys[row]) or any(
            seen_right[key] >= limit for key in right_keys[row]
        ):
            dropped[row] = f"alike to more than |s|/k = {limit} rows (Theorem 5.3): no grouping can keep it"
            continue
        seen_left.update(left_keys[row])
        seen_right.update(right_keys[row])
    return dropped


def verify(grouping: Grouping, left_keys: Sequence[Keys], right_keys: Sequence[Keys], k: int) -> list[str]:
    """Why the published grouping is not a k-loose association (Definitions 5.1 and 5.4), one sentence
    each; empty when it is. Needs only what is published (groups, the pair of every row) and the alike
    keys of the halves. O(rows + pairs * group size * constraints)."""
    problems: list[str] = []
    rows = [
        i for i, (g, h) in enumerate(zip(grouping.left, grouping.right, strict=True)) if g is not None and h is not None
    ]
    members_l: dict[int, list[int]] = defaultdict(list)
    members_r: dict[int, list[int]] = defaultdict(list)
    for i in rows:
        members_l[grouping.left[i]].append(i)  # type: ignore[index]
        members_r[grouping.right[i]].append(i)  # type: ignore[index]
    for side, members, least in (("left", members_l, grouping.k_left), ("right", members_r, grouping.k_right)):
        small = [g for g, m in members.items() if len(m) < least]
        if small:
            problems.append(f"{len(small)} {side} group(s) smaller than k = {least} (Definition 5.1), e.g. {small[0]}")
    paired_l: dict[int, set[int]] = defaultdict(set)
    paired_r: dict[int, set[int]] = defaultdict(set)
    for i in rows:
        paired_l[grouping.left[i]].add(grouping.right[i])  # type: ignore[index,arg-type]
        paired_r[grouping.right[i]].add(grouping.left[i])  # type: ignore[index,arg-type]
    for side, paired, other_members, keys in (
        ("left", paired_l, members_r, right_keys),
        ("right", paired_r, members_l, left_keys),
    ):
        for group, others in sorted(paired.items()):
            halves = [i for other in others for i in other_members[other]]
            if len(halves) < k:
                problems.append(f"{side} group {group} is paired with {len(halves)} halves, fewer than k = {k}")
            seen: dict[int, int] = {}
            for i in halves:
                clash = next((seen[key] for key in keys[i] if key in seen), None)
                if clash is not None:
                    problems.append(f"{side} group {group} is paired with rows {clash} and {i}, which are alike")
                    break
                seen.update(dict.fromkeys(keys[i], i))
    return problems


@dataclass(frozen=True)
class Exposure:
    """Section 6 for one constraint: alike classes of each side (row numbers), and the probability of
    each (left class, right class) association without and with the loose association published."""

    left_classes: tuple[tuple[int, ...], ...]
    right_classes: tuple[tuple[int, ...], ...]
    without: tuple[tuple[Fraction, ...], ...]
    with_association: tuple[tuple[Fraction, ...], ...]

    @property
    def increase(self) -> Fraction:
        """The largest increase of exposure, max(P^A - P): publish only when delta_max is at least this."""
        return max(
            (
                a - b
                for row_a, row_b in zip(self.with_association, self.without, strict=True)
                for a, b in zip(row_a, row_b, strict=True)
            ),
            default=Fraction(0),
        )


def exposure(grouping: Grouping, left_codes: Sequence[int], right_codes: Sequence[int]) -> Exposure:
    """The probabilities of section 6 for one constraint, given each row's code of its values on the
    constraint's attributes in the left and in the right fragment (alike classes: equal codes).

    Without the association a left half goes with any right half: P(l, r) = 1/|s|. With it, l goes with
    one of the halves T of the right groups paired with its group, each equally: P^A(l, r) = 1/|T| for r
    in T, 0 otherwise (every row of Figure 6(a) has k entries of 1/k). A class pair's probability is
    the composite of its tuple pairs, taken as independent: 1 - prod(1 - P(l, r)) (so 1 - (7/8)^4 =
    1695/4096 for two alike halves on each side among eight rows, Figure 5(b)). Exact fractions;
    O(classes^2 * class sizes), for tables small enough to print."""
    rows = [i for i in range(len(left_codes)) if grouping.left[i] is not None and grouping.right[i] is not None]
    n = len(rows)
    left_classes = _classes(rows, left_codes)
    right_classes = _classes(rows, right_codes)
    members_r: dict[int, list[int]] = defaultdict(list)
    paired: dict[int, set[int]] = defaultdict(set)
    for i in rows:
        members_r[grouping.right[i]].append(i)  # type: ignore[index]
        paired[grouping.left[i]].add(grouping.right[i])  # type: ignore[index,arg-type]
    reach = {g: {i for h in hs for i in members_r[h]} for g, hs in paired.items()}
    base = Fraction(1, n) if n else Fraction(0)
    without, loose = [], []
    for lc in left_classes:
        row_without, row_loose = [], []
        for rc in right_classes:
            row_without.append(1 - (1 - base) ** (len(lc) * len(rc)))
            stay = Fraction(1)
            for half in lc:
                t = reach[grouping.left[half]]  # type: ignore[index]
                for r in rc:
                    if r in t:
                        stay *= 1 - Fraction(1, len(t))
            row_loose.append(1 - stay)
        without.append(tuple(row_without))
        loose.append(tuple(row_loose))
    return Exposure(left_classes, right_classes, tuple(without), tuple(loose))


def _classes(rows: Sequence[int], codes: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    """Rows by equal code, classes in order of their first row."""
    by_code: dict[int, list[int]] = {}
    for i in rows:
        by_code.setdefault(codes[i], []).append(i)
    return tuple(tuple(members) for members in by_code.values())
