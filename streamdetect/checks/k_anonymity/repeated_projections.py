"""New PFs of a holder that repeat an earlier PF's projection take its set instead of joining again.

w(p) is the join rows whose holder row is p, so two PFs with the same projection on the attributes a set
reads have the same set, and new rows of the holder do not change an earlier PF's set: a batch joins the
first PF of each projection only, and the others copy its pairs (:func:`firsts_only`). Worth it only where
the holder's rows repeat their projections (on BP, v4's batches: 0.13 -> 0.04 s).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from streamdetect.checks.k_anonymity.kept_relations import PF, Filters
from streamdetect.checks.k_anonymity.withdrawals import among
from streamdetect.model.topology import ViewDefinition
from streamdetect.relational import code_arrays
from streamdetect.relational.code_arrays import CodeRelation
from streamdetect.relational.linked_values import SharedWork

if TYPE_CHECKING:
    from streamdetect.checks.k_anonymity.association_covers import AssociationCoverState, SetKey

#: A holder's new PFs are matched with earlier ones of the same projection when its rows repeat their
#: projections this many times on average (below, every new PF runs).
REPEATS = 2


def firsts_only(
    views: Sequence[ViewDefinition],
    state: AssociationCoverState,
    key: SetKey,
    relations: dict[str, pl.DataFrame],
    projection: tuple[list[str], Filters],
    *,
    shared: SharedWork,
) -> Callable[[pl.DataFrame], pl.DataFrame] | None:
    """Leave in the holder's relation (its new PFs: the rows the batch added) only the first PF of each
    projection; return how the others' pairs follow from the pairs found (None: every PF runs).

    w(p) is the join rows whose holder row is p, so two PFs with the same projection on the attributes
    the set reads have the same set, and new rows of the holder do not change an earlier PF's set. When
    the holder holds the target and no other view does, the target is left out of the projection: a PF's
    set is then its own value if it joins at all, as the first of its projection does."""
    holder, _, _, target = key
    attributes, filters = projection
    own = target in attributes and sum(target in view.attributes for view in views) == 1
    keys = [a for a in attributes if not (own and a == target)]
    if not keys:
        return None  # a holder sharing nothing the set reads: its PFs all have one set
    # The target left out of the projection still leaves out the rows with a null there.
    filters = (*filters, target) if own else filters
    # Counted on the view's distinct projections: the firsts are only built for the holders that pass.
    distinct = state.kept.relation(state.seen, holder, keys, False, filters).height
    if distinct * REPEATS > state.seen.height(holder):
        return None  # projections seldom repeat: matching the new PFs would cost more than it spares
    new = relations[holder]
    firsts = shared.remember(
        ("firsts", holder, tuple(keys), filters), partial(state.kept.firsts, state.seen, holder, keys, filters)
    )
    if code_arrays.codes_only(new) and code_arrays.codes_only(firsts):
        reps = shared.remember(
            ("matched codes", holder, tuple(attributes), tuple(keys), filters), partial(_reps, new, firsts, keys)
        )
        return _copies_in_codes(state, key, relations, new, reps, own=own)
    rep = "\0rep"
    matched = shared.remember(
        ("matched", holder, tuple(attributes), tuple(keys), filters),
        partial(_matched, new, firsts, keys, rep),
    )
    relations[holder] = matched.filter(pl.col(rep) == pl.col(PF)).drop(rep)
    others = matched.filter(pl.col(rep) != pl.col(PF))

    def copied(found: pl.DataFrame) -> pl.DataFrame:
        if others.is_empty():
            return found.clear()
        # Only the pairs of the firsts the others repeat: the holder's whole set is far larger than the
        # batch's copies (a unique over it all cost ~7 ms per set and batch on BP).
        reps = others.get_column(rep)
        current = state.sets.get(key)
        parts = [] if current is None else [current.filter(pl.col(PF).is_in(reps))]
        parts.append(found.filter(pl.col(PF).is_in(reps)))
        sources = pl.concat(parts, how="vertical_relaxed").rename({PF: rep})
        if own:
            return others.join(sources.select(rep).unique(), on=rep, how="semi").select(PF, target)
        # A first's pair can be both kept and found again (a row withdrawn and published again in the batch,
        # whose set a subset state's withdrawal took from the rows present): copied once.
        return others.select(PF, rep).join(sources.unique(), on=rep).select(PF, target)

    return copied


def _reps(new: pl.DataFrame, firsts: pl.DataFrame, keys: list[str]) -> np.ndarray[Any, Any]:
    """Per row of ``new`` (codes), the first PF of its projection on ``keys`` (its own PF when it is the first,
    or when its projection is not among the firsts: a null they leave out), over the codes in numpy."""
    own_pf = new.get_column(PF).to_numpy()
    first_pf = firsts.get_column(PF).to_numpy()
    if not len(first_pf):
        return own_pf
    at = code_arrays.positions_in(
        CodeRelation.from_frame(new.select(keys)), CodeRelation.from_frame(firsts.select(keys)), keys
    )
    reps: np.ndarray[Any, Any] = np.where(at >= 0, first_pf[np.maximum(at, 0)], own_pf)
    return reps


def _copies_in_codes(
    state: AssociationCoverState,
    key: SetKey,
    relations: dict[str, pl.DataFrame],
    new: pl.DataFrame,
    reps: np.ndarray[Any, Any],
    *,
    own: bool,
) -> Callable[[pl.DataFrame], pl.DataFrame]:
    """:func:`firsts_only` over the dictionary codes in numpy (the holder's new rows and the firsts are codes,
    as kept projections are; ``reps``: :func:`_reps`): the same rows and pairs, where the polars version made
    a dozen small queries per set and batch (a left join, filters, a concat, a unique, a join), each a fixed
    cost of its own."""
    holder, _, _, target = key
    own_pf = new.get_column(PF).to_numpy()
    is_first = reps == own_pf
    relations[holder] = new if is_first.all() else new.filter(pl.Series(is_first))
    others = ~is_first
    if not others.any():
        return lambda found: found.clear()
    other_pf, other_rep = own_pf[others], reps[others]

    def copied(found: pl.DataFrame) -> pl.DataFrame:
        # Only the pairs of the firsts the others repeat (from the set kept and those found now).
        sources = [found] if (current := state.sets.get(key)) is None else [current, found]
        pairs = [
            CodeRelation.from_frame(frame.select(PF, target)).take(
                np.flatnonzero(among(frame.get_column(PF).to_numpy(), other_rep))
            )
            for frame in sources
        ]
        source_pf = np.concatenate([pair.column(PF) for pair in pairs])
        source_target = np.concatenate([pair.column(target) for pair in pairs])
        dtype = found.schema[target]
        if own:
            # The holder alone holds the target: a copy takes its own value when its first joined at all.
            joined = among(other_rep, source_pf)
            value = new.get_column(target).to_numpy()[others][joined]
            return pl.DataFrame(
                {PF: pl.Series(other_pf[joined], dtype=pl.UInt32), target: pl.Series(value, dtype=dtype)}
            )
        # A first's pair can be both kept and found again: copied once.
        distinct = code_arrays.first_positions(code_arrays.row_keys([source_pf, source_target]))
        joined_rel = code_arrays.join(
            CodeRelation([PF, "\0rep"], [other_pf, other_rep], len(other_pf)),
            CodeRelation(["\0rep", target], [source_pf[distinct], source_target[distinct]], len(distinct)),
            ["\0rep"],
        )
        return pl.DataFrame(
            {
                PF: pl.Series(joined_rel.column(PF), dtype=pl.UInt32),
                target: pl.Series(joined_rel.column(target), dtype=dtype),
            }
        )

    return copied


def _matched(new: pl.DataFrame, firsts: pl.DataFrame, keys: list[str], rep: str) -> pl.DataFrame:
    """``new`` with, per row, the first PF of its projection on ``keys`` (``rep``; the row's own PF when it
    is the first)."""
    return new.join(firsts.rename({PF: rep}), on=keys, how="left").with_columns(pl.col(rep).fill_null(pl.col(PF)))
