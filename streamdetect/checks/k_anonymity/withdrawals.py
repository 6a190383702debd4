"""Withdrawn rows taken out of the capped sets where they reached, instead of every set computed again.

A capped set holds, per projection fact p of its holder view, at most ``cap`` values of its target in
w(p), the rows of T^v (the join of the views) that project onto p (:mod:`.association_covers`). Withdrawing
rows of a view c (those no longer present at all: a bag keeps a row while one occurrence is left) removes
from T^v exactly the join rows built on them, and changes nothing else while no view becomes empty (an
empty view leaves T^v, which grows: the caller recomputes then). So only the projection facts whose w(p)
held such a join row can have another set, and theirs is computed again from the rows present:

- a fact of c itself that is no longer present has no set;
- for another view c, a set reads c's rows projected on some attributes (:meth:`AssociationCoverCheck.reads`),
  and only the projections no present row of c still has (*vanished*) take join rows with them; the facts
  they reached are those of the join of the vanished projections with the other views *before* the
  withdrawal, which are at most the rows present now and the other views' vanished projections (a row
  withdrawn and published again is present). A superset of the facts changed is enough: a fact reached
  needlessly gets the set it has.

Cost per set: one capped join from the vanished projections (cap 1: whether a fact is reached), and one
for the facts reached, where a recomputation joined every fact. The same holds of a set that has not yet
taken rows added after the withdrawal (a subset state caught up later, :mod:`.join_search`): its facts are
reached against the rows present then (a superset again), computed again from them, and the rows added
since then grow every set as usual (a set already exact takes nothing from them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from streamdetect.checks.k_anonymity.kept_relations import PF, Filters, KeptRelations, projected
from streamdetect.checks.seen_rows import SeenRows
from streamdetect.relational import code_arrays
from streamdetect.relational.code_arrays import indices
from streamdetect.relational.linked_values import Plan, SharedWork, linked_values

#: Per view: the rows a withdrawal left with no occurrence (encoded, as stored) and their positions.
Gone = list[tuple[str, pl.DataFrame, pl.Series]]
#: Per view a set reads: its attributes, and the attributes whose nulls leave a row out.
Reads = Mapping[str, tuple[list[str], Filters]]


@dataclass
class Withdrawal:
    """The rows gone from some views, and what is computed from them once for every set: per (view,
    attributes, filters), the projections of the rows gone that no present row has (:meth:`vanished`)."""

    seen: SeenRows
    kept: KeptRelations
    gone: Gone
    shared: SharedWork
    #: Elimination orders, per (set, question, size classes), as the delta joins keep theirs.
    plans: dict[Any, Plan]
    _vanished: dict[tuple[str, tuple[str, ...], Filters], pl.DataFrame] = field(default_factory=dict)

    def rows(self, view: str) -> tuple[pl.DataFrame, pl.Series] | None:
        """The rows gone from ``view`` and their positions (None: none)."""
        parts = [(rows, positions) for name, rows, positions in self.gone if name == view]
        if not parts:
            return None
        if len(parts) == 1:
            return parts[0]
        return pl.concat([rows for rows, _ in parts]), pl.concat([positions for _, positions in parts])

    def vanished(self, view: str, attributes: list[str], filters: Filters) -> pl.DataFrame:
        """The distinct projections of ``view``'s rows gone that none of its present rows has."""
        key = (view, tuple(attributes), filters)
        found = self._vanished.get(key)
        if found is None:
            gone = self.rows(view)
            assert gone is not None
            mine = projected(gone[0], attributes, None, filters)
            present = self.kept.relation(self.seen, view, attributes, False, filters)
            found = self._vanished[key] = mine.join(present, on=attributes, how="anti") if mine.height else mine
        return found

    def reached(self, key: tuple[str, str, str, str], reads: Reads) -> np.ndarray[Any, Any]:
        """The positions of the holder's projection facts whose w(p) held a join row built on a row gone
        (a superset of them), for the set ``key`` (holder, identifier, sensitive, target) reading ``reads``."""
        holder, _, _, target = key
        reached: list[np.ndarray[Any, Any]] = []
        own = self.rows(holder)
        if own is not None:
            reached.append(own[1].to_numpy().astype(np.int64))
        lost: dict[str, pl.DataFrame] = {}
        for name, _, _ in self.gone:
            if name != holder and name in reads and name not in lost:
                lost[name] = self.vanished(name, *reads[name])
        for name, frame in lost.items():
            if not frame.height:
                continue
            relations: dict[str, pl.DataFrame] = {}
            for other, (attributes, filters) in reads.items():
                if other == name:
                    relations[other] = frame
                    continue
                relation = self.kept.relation(self.seen, other, attributes, other == holder, filters)
                before = lost.get(other)
                # The other views as they were: their rows present and their own vanished projections.
                relations[other] = pl.concat([relation, before]) if before is not None and before.height else relation
            sizes = tuple(relation.height.bit_length() // 2 for relation in relations.values())
            plan = self.plans.setdefault((key, f"reached from {name}", sizes), Plan())
            found = linked_values(relations, PF, target, 1, self.shared, plan=plan)
            reached.append(found.get_column(PF).to_numpy().astype(np.int64))
        if not reached:
            return np.zeros(0, dtype=np.int64)
        positions: np.ndarray[Any, Any] = np.unique(np.concatenate(reached))
        return positions

    def recomputed(
        self, key: tuple[str, str, str, str], reads: Reads, reached: np.ndarray[Any, Any], cap: int
    ) -> pl.DataFrame:
        """The capped sets of the holder's facts at ``reached`` over the rows present (those not present have
        none): pairs (PF, target)."""
        holder, _, _, target = key
        relations: dict[str, pl.DataFrame] = {}
        for name, (attributes, filters) in reads.items():
            relation = self.kept.relation(self.seen, name, attributes, name == holder, filters)
            relations[name] = facts_at(relation, reached, self.kept) if name == holder else relation
        sizes = tuple(relation.height.bit_length() // 2 for relation in relations.values())
        plan = self.plans.setdefault((key, "reached again", sizes), Plan())
        return linked_values(relations, PF, target, cap, self.shared, plan=plan)


def facts_at(relation: pl.DataFrame, chosen: np.ndarray[Any, Any], kept: KeptRelations) -> pl.DataFrame:
    """The rows of a holder's relation (with its PF column) whose fact is at one of ``chosen`` (positions),
    in their order: by a mask over the positions, taken from the relation's codes kept with it when it is all
    codes (a polars semi join or filter of the holder's tens of thousands of rows cost a fixed millisecond)."""
    rows = np.flatnonzero(among(relation.get_column(PF).to_numpy(), chosen))
    if code_arrays.codes_only(relation):
        return kept.caps.codes(relation).take(rows).to_frame()
    return relation[rows]


def among(positions: np.ndarray[Any, Any], chosen: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Whether each of ``positions`` is one of ``chosen`` (stored rows' positions, small integers): a lookup
    in a mask, where ``np.isin`` sorted both (a set's tens of thousands of pairs per set and batch)."""
    if not len(positions) or not len(chosen):
        return np.zeros(len(positions), dtype=bool)
    mask = np.zeros(max(int(positions.max()), int(chosen.max())) + 1, dtype=bool)
    mask[chosen] = True
    found: np.ndarray[Any, Any] = mask[indices(positions)]
    return found
