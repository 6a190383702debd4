"""k-anonymization by k-multiset dependencies: K-MSD and K-MSD-AG (Huang et al. 2014, sections 5-6).

K-MSD builds k-multiset dependencies among the quasi-identifiers one attribute at a time (Theorem 3:
once ``A_anony ->k (QI - A_anony)``, T[QI] is k-anonymous):

1. ``A_anony`` starts as an initial maximal k-anonymized attribute set (IMKAS, Definition 6: the largest
   subset of QI whose projection is already k-anonymous); when there is none, the attribute with the
   fewest k-violation values, generalized by minimal distance generalization (MDG) until it is.
2. While attributes remain, the one with the fewest K-MSD-violation values (values appearing fewer
   than k times within a group of equal ``A_anony`` values) is generalized by MDG inside each group,
   and joins ``A_anony``.

MDG (section 5, problem 2): a value appearing fewer than k times in its group is generalized together
with the fewest other values of the group that share its ancestor at the lowest level where their
rows reach k (violating values first, then the rarest): local recoding, as the paper's Table 7 shows
(USA stays USA while Korea and Japan become Asia).

K-MSD-AG (section 6) keeps functional dependencies among the quasi-identifiers: ``A_anony`` starts from
the left side that occurs most often in the FDs, made k-anonymous (by MDG, or by K-MSD on a set); then,
while some FD ``X -> Y`` has ``X`` inside ``A_anony`` and ``Y`` not, every group of equal ``X`` values
gets one common generalization of its ``Y`` values (association generalization, Definition 8; Theorem
5: X -> Y and X ->k Y then hold), and ``Y`` joins ``A_anony``; otherwise the K-MSD step above. On Huang's
Table 1 this gives Table 7 (K-MSD) and Table 10 (K-MSD-AG, Department -> Phone kept).

Pure: columns of strings in, generalization levels out. O(|QI| * rows) per step, plus 2^|QI| subsets
for the IMKAS (quasi-identifiers are few).
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from streamdetect.model.hierarchies import SUPPRESS, Hierarchy

Column = list[str | None]


@dataclass
class Generalized:
    """The quasi-identifier columns as generalized: per attribute, each row's level (0: unchanged)."""

    original: dict[str, Column]
    hierarchies: dict[str, Hierarchy]
    levels: dict[str, list[int]]

    def value(self, attribute: str, row: int) -> str | None:
        return self.hierarchies[attribute].generalize(self.original[attribute][row], self.levels[attribute][row])

    def column(self, attribute: str) -> Column:
        """The attribute's generalized values, in row order."""
        return [self.value(attribute, row) for row in range(len(self.original[attribute]))]

    def key(self, attributes: Sequence[str], row: int) -> tuple[str | None, ...]:
        return tuple(self.value(a, row) for a in attributes)

    def groups(self, attributes: Sequence[str]) -> list[list[int]]:
        """Rows by equal generalized values of ``attributes`` (all rows in one group for none)."""
        by_key: dict[tuple[str | None, ...], list[int]] = defaultdict(list)
        for row in range(self.rows):
            by_key[self.key(attributes, row)].append(row)
        return list(by_key.values())

    @property
    def rows(self) -> int:
        return len(next(iter(self.original.values()), []))


def is_k_anonymous(table: Generalized, attributes: Sequence[str], k: int) -> bool:
    """Definition 2 on the generalized values: every combination of ``attributes`` counts at least k."""
    counts = Counter(table.key(attributes, row) for row in range(table.rows))
    return all(n >= k for n in counts.values())


def _violations(table: Generalized, groups: Sequence[Sequence[int]], attribute: str, k: int) -> int:
    """K-MSD-violation values: (group, value) pairs with fewer than k rows."""
    count = 0
    for group in groups:
        counts = Counter(table.value(attribute, row) for row in group)
        count += sum(1 for n in counts.values() if n < k)
    return count


def mdg(table: Generalized, group: Sequence[int], attribute: str, k: int) -> None:
    """Minimal distance generalization of ``attribute`` inside one group of at least k rows, until every
    value of it appears at least k times there. Level by level from the bottom: the values sharing an
    ancestor at that level form a bucket; a bucket holding violating values whose rows reach k merges
    its violating values with the fewest others (rarest first) into the ancestor; buckets that cannot
    reach k wait for the next level. Whole values only, so an untouched value keeps its count. Every
    hierarchy ends in ``*``: at the top the group merges. O(levels * rows of the group)."""
    hierarchy = table.hierarchies[attribute]
    original = table.original[attribute]
    levels = table.levels[attribute]
    top = max(hierarchy.height(original[r]) for r in group)
    for level in range(1, top + 1):
        cells: dict[str | None, list[int]] = defaultdict(list)
        for row in group:
            cells[table.value(attribute, row)].append(row)
        violating = {v for v, rows in cells.items() if len(rows) < k}
        if not violating:
            return
        buckets: dict[str | None, list[str | None]] = defaultdict(list)
        for value, rows in cells.items():
            ancestors = {hierarchy.generalize(original[r], max(level, levels[r])) for r in rows}
            if len(ancestors) == 1:
                buckets[ancestors.pop()].append(value)
        for members in buckets.values():
            bad = sorted((v for v in members if v in violating), key=lambda v: (len(cells[v]), str(v)))
            if not bad or sum(len(cells[v]) for v in members) < k:
                continue
            chosen, total = list(bad), sum(len(cells[v]) for v in bad)
            for value in sorted((v for v in members if v not in violating), key=lambda v: (len(cells[v]), str(v))):
                if total >= k:
                    break
                chosen.append(value)
                total += len(cells[value])
            for value in chosen:
                for row in cells[value]:
                    levels[row] = max(level, levels[row])
    if any(n < k for n in Counter(table.value(attribute, r) for r in group).values()):
        raise ValueError(f"a group of {len(group)} rows cannot reach k = {k}")  # the top merges all: a bug


def association_generalization(table: Generalized, lhs: Sequence[str], rhs: Sequence[str]) -> None:
    """Definition 8: rows with equal generalized ``lhs`` values get one value of each ``rhs`` attribute,
    the lowest common generalization of theirs (so ``lhs -> rhs`` holds after, Theorem 5)."""
    for group in table.groups(lhs):
        for attribute in rhs:
            hierarchy = table.hierarchies[attribute]
            original = table.original[attribute]
            levels = table.levels[attribute]
            top = max(hierarchy.height(original[r]) for r in group) + 1
            for level in range(max(levels[r] for r in group), top + 1):
                values = {hierarchy.generalize(original[r], max(level, levels[r])) for r in group}
                if len(values) == 1:
                    for r in group:
                        levels[r] = max(level, levels[r])
                    break


def imkas(table: Generalized, quasi: Sequence[str], k: int) -> tuple[str, ...]:
    """Definition 6: the largest subset of ``quasi`` already k-anonymous (the first in QI order among
    equals), or () when no attribute alone is. O(2^|QI| * rows)."""
    for size in range(len(quasi), 0, -1):
        for subset in itertools.combinations(quasi, size):
            if is_k_anonymous(table, subset, k):
                return subset
    return ()


def k_msd(table: Generalized, quasi: Sequence[str], k: int) -> list[str]:
    """K-MSD (section 5) on ``table`` in place; the order attributes joined A_anony."""
    if table.rows < k:
        raise ValueError(f"the table has {table.rows} rows, fewer than k = {k}")
    anony = list(imkas(table, quasi, k))
    if not anony:
        everyone = [list(range(table.rows))]
        first = min(quasi, key=lambda a: (_violations(table, everyone, a, k), quasi.index(a)))
        mdg(table, everyone[0], first, k)
        anony = [first]
    extend_segments(table, quasi, anony, k)
    return anony


def extend_segments(table: Generalized, quasi: Sequence[str], anony: list[str], k: int) -> None:
    """Step 2 of K-MSD, until every quasi-identifier is in ``anony``."""
    while len(anony) < len(quasi):
        _add_one(table, quasi, anony, k)


def _add_one(table: Generalized, quasi: Sequence[str], anony: list[str], k: int) -> None:
    """One K-MSD step: the attribute with the fewest K-MSD violations (ties: QI order) generalized by MDG
    in every group of equal ``anony`` values, then added to ``anony``."""
    groups = table.groups(anony)
    rest = [a for a in quasi if a not in anony]
    chosen = min(rest, key=lambda a: (_violations(table, groups, a, k), quasi.index(a)))
    for group in groups:
        mdg(table, group, chosen, k)
    anony.append(chosen)


def k_msd_ag(
    table: Generalized, quasi: Sequence[str], k: int, dependencies: Sequence[tuple[Sequence[str], Sequence[str]]]
) -> list[str]:
    """K-MSD-AG (section 6.1.2) on ``table`` in place, keeping the FDs ``dependencies`` (lhs, rhs) whose
    sides lie in ``quasi``; the order attributes joined A_anony. Without such an FD it is K-MSD."""
    if table.rows < k:
        raise ValueError(f"the table has {table.rows} rows, fewer than k = {k}")
    fds = [(tuple(lhs), tuple(a for a in rhs if a in quasi)) for lhs, rhs in dependencies if set(lhs) <= set(quasi)]
    fds = [(lhs, rhs) for lhs, rhs in fds if rhs]
    if not fds:
        return k_msd(table, quasi, k)
    # The left side that occurs most often in the FDs (ties: the earliest in QI order).
    sides = Counter(lhs for lhs, _ in fds)
    start = max(sides, key=lambda lhs: (sides[lhs], -min(quasi.index(a) for a in lhs)))
    if len(start) == 1:
        mdg(table, list(range(table.rows)), start[0], k)
        anony = [start[0]]
    else:
        anony = k_msd(table, list(start), k)
    while len(anony) < len(quasi):
        applicable = [(lhs, rhs) for lhs, rhs in fds if set(lhs) <= set(anony) and set(rhs) - set(anony)]
        if applicable:
            for lhs, rhs in applicable:
                association_generalization(table, lhs, [a for a in rhs if a not in anony])
                anony += [a for a in rhs if a not in anony]
            continue
        _add_one(table, quasi, anony, k)
    return anony


def prepare(columns: Mapping[str, Column], hierarchies: Mapping[str, Hierarchy]) -> Generalized:
    """A table to generalize: every attribute at level 0 (attributes without a hierarchy get one step to
    ``*``)."""
    return Generalized(
        original={a: list(values) for a, values in columns.items()},
        hierarchies={a: hierarchies.get(a, SUPPRESS) for a in columns},
        levels={a: [0] * len(values) for a, values in columns.items()},
    )


@dataclass(frozen=True)
class Loss:
    """What a generalization costs: per attribute the largest and mean generalization distance
    (Definitions 3-4), the discernibility metric (sum of squared QI group sizes: lower is better) and the
    normalized certainty penalty (mean over QI cells of (originals a generalized value covers - 1) /
    (distinct originals - 1): 0 unchanged, 1 fully suppressed)."""

    distance: dict[str, tuple[int, float]]
    discernibility: int
    ncp: float


def information_loss(table: Generalized, quasi: Sequence[str]) -> Loss:
    """The :class:`Loss` of ``table``'s generalization of ``quasi``. O(|QI| * rows)."""
    distance = {a: (max(table.levels[a], default=0), sum(table.levels[a]) / max(table.rows, 1)) for a in quasi}
    discernibility = sum(len(group) ** 2 for group in table.groups(quasi))
    penalties = []
    for a in quasi:
        originals = {v for v in table.original[a] if v is not None}
        # A generalized value covers every original of the table that reaches it at that level.
        cover: dict[tuple[int, str | None], int] = {}
        for level in set(table.levels[a]):
            reached = Counter(table.hierarchies[a].generalize(o, level) for o in originals)
            cover.update({(level, value): n for value, n in reached.items()})
        span = max(len(originals) - 1, 1)
        for row in range(table.rows):
            if table.original[a][row] is None:
                penalties.append(0.0)
            else:
                penalties.append((cover[(table.levels[a][row], table.value(a, row))] - 1) / span)
    return Loss(distance, discernibility, sum(penalties) / max(len(penalties), 1))
