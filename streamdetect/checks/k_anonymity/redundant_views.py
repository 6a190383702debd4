"""Views a subset can leave out without changing the covers it finds for one (identifier, sensitive) pair.

The forcing-view search (:mod:`.forcing_views`) asks subsets of the views which covers they find, and most
of its runs on a stream find nothing: a subset of three views that adds, to a pair of views tried before,
one that only filters their join (on BP, v3 or v4 beside v1 and v5). Such a run need not be made.

Let S be a subset, (ID, P) a pair, V a view of S holding neither ID nor P, T' the natural join of the other
views of S (those with rows present), and A the attributes V shares with them. If some view U of S
other than V holds all of A, and every value of A in T' is one V has (the join with V loses no row of
T'), then S finds for (ID, P) exactly the minimal covers S without V finds:

- for a fact q of a view other than V, w(q) over S projects on (ID, P) as over S without V: T' loses no
  row, and V adds no value of ID or P;
- for a fact p of V, every row of w(p) has A = p[A] (V's other attributes are unshared: they only
  repeat rows), so any such row projects onto a fact q of U with q[A] = p[A], and w(q) is within w(p):
  the cover p gives (one identifier value) contains the one q gives, so it is never a smaller one.

The test here is sufficient, cheap, and never wrong: the values of A in T' are among those of every
view holding all of A, so V is redundant when their intersection is within V's values. A null in A in
one of those views' rows could survive T' (an attribute a view shares only with V is not read without
V) and would join nothing in V: then V is kept. A view with no rows present is not released
(``AssociationCoverCheck.released``): S is the check over S without it, whatever its attributes.

Redundancy is tested on the rows present, so a search that reduced a subset tests it again before its
findings stand (``join_search.Search``). docs/design.md, "Which views force a cover".

With selections (the cell procedure, :func:`without_redundant_views_in_rows`), V must have no selection, U
none either (every tuple then takes its A from a row of U, never a free value of a tuple outside U's
selection), and no selection of the other views may read an attribute of V that they do not hold: a tuple
of the others' cells, its A among V's values, then keeps its cells when V's unshared attributes take the
values of a row of V with that A, so the tuple sets of the others' facts keep their (ID, P) projections, and
a fact p of V covers what the facts q of U with q[A] = p[A] cover, as above. Some other view must have rows:
V's rows say that the table has some, which views published empty under a selection do not (a fact of V
would then give a cover that no other fact gives). Rows with a null anywhere keep every view (the cell
procedure drops such rows).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial

import numpy as np
import polars as pl

from streamdetect.checks.k_anonymity.kept_relations import KeptRelations
from streamdetect.checks.seen_rows import SeenRows
from streamdetect.model.predicates import attributes_of
from streamdetect.model.topology import ViewDefinition
from streamdetect.relational import code_arrays


def without_redundant_views(
    subset: frozenset[str],
    pair: tuple[str, str],
    views: Mapping[str, ViewDefinition],
    seen: SeenRows,
    kept: KeptRelations,
) -> frozenset[str]:
    """``subset`` without views redundant for ``pair`` (module docstring), one at a time in name order until
    none is: a subset whose check finds for ``pair`` the covers ``subset``'s finds."""
    return _reduced(subset, lambda name, others: _redundant(name, others, pair, views, seen, kept))


def _redundant(  # noqa: PLR0917 -- private; the reduction passes its whole context
    name: str,
    others: set[str],
    pair: tuple[str, str],
    views: Mapping[str, ViewDefinition],
    seen: SeenRows,
    kept: KeptRelations,
) -> bool:
    attributes = views[name].attributes
    present = [other for other in sorted(others) if seen.height(other)]
    if any(attribute in attributes for attribute in pair) or not present:
        return False
    if not seen.height(name):
        return True  # not released: the check over the subset leaves it out already
    shared = [a for a in attributes if any(a in views[other].attributes for other in present)]
    holders = [other for other in present if set(shared) <= set(views[other].attributes)]
    nulls = any(
        seen.rows[other].get_column(a).null_count() for other in present for a in shared if a in views[other].attributes
    )
    if not holders or nulls:
        return False
    if not shared:
        return True  # a cross product with a view that has rows: it repeats every join row
    frames = tuple(kept.relation(seen, view, shared, False) for view in [*holders, name])
    question = ("within", name, tuple(holders), tuple(shared))
    return kept.remembered(question, frames, partial(_within, frames, shared))


def without_redundant_views_in_rows(
    subset: frozenset[str],
    pair: tuple[str, str],
    views: Mapping[str, ViewDefinition],
    rows: Mapping[str, pl.DataFrame],
) -> frozenset[str]:
    """``subset`` without views redundant for ``pair`` under selections (module docstring), from the views'
    kept rows (``rows``; a view missing has none), one at a time in name order until none is."""
    return _reduced(subset, lambda name, others: _redundant_in_rows(name, others, pair, views, rows))


def _reduced(subset: frozenset[str], redundant: Callable[[str, set[str]], bool]) -> frozenset[str]:
    """``subset`` without the views ``redundant(view, the others)`` says it can leave out, one at a time in
    name order until none is (each test reads the views left)."""
    current = set(subset)
    while True:
        removable = next((name for name in sorted(current) if redundant(name, current - {name})), None)
        if removable is None:
            return frozenset(current)
        current.discard(removable)


def _redundant_in_rows(
    name: str,
    others: set[str],
    pair: tuple[str, str],
    views: Mapping[str, ViewDefinition],
    rows: Mapping[str, pl.DataFrame],
) -> bool:
    view = views[name]
    height = {other: rows[other].height if other in rows else 0 for other in [*others, name]}
    # The views the check over the others reads: with rows, or with a selection (published empty).
    released = [other for other in sorted(others) if height[other] or views[other].where is not None]
    if view.where is not None or any(attribute in view.attributes for attribute in pair) or not released:
        return False
    if not height[name]:
        return True  # no rows and no selection: not released, the check over the subset leaves it out already
    held = {a for other in released for a in views[other].attributes}
    unshared = [a for a in view.attributes if a not in held]
    conditions = [where for other in released if (where := views[other].where) is not None]
    read = {a for condition in conditions for a in attributes_of(condition)}
    # V's rows say the table has some, which others published empty under a selection do not.
    if (
        not any(height[other] for other in released)
        or read & set(unshared)
        or any(rows[other].null_count().sum_horizontal().item() for other in [name, *released] if height[other])
    ):
        return False
    shared = [a for a in view.attributes if a in held]
    if not shared:
        return True  # a cross product with a view that has rows, on attributes no selection reads
    holders = [
        other
        for other in released
        if views[other].where is None and height[other] and set(shared) <= set(views[other].attributes)
    ]
    if not holders:
        return False
    frames = tuple(rows[other].select(shared).unique() for other in [*holders, name])
    return _within(frames, shared)


def _within(frames: tuple[pl.DataFrame, ...], shared: list[str]) -> bool:
    """Whether every row of ``shared`` in the intersection of the frames but the last is in the last."""
    if len(shared) == 1 and all(code_arrays.codes_only(frame) for frame in frames):
        return _within_codes(frames, shared[0])
    *holders, view = frames
    reached = holders[0]
    for values in holders[1:]:
        reached = reached.join(values, on=shared, how="semi")
    return reached.join(view, on=shared, how="anti").is_empty()


def _within_codes(frames: tuple[pl.DataFrame, ...], column: str) -> bool:
    """:func:`_within` for frames of distinct codes of one attribute: how many of the holders show each
    code (a count per code), against a flag per code of the last frame. O(rows + codes), where polars'
    semi and anti joins cost 1-2 ms on BP's projections (a search tests the subsets with a view that
    changed again each batch)."""
    *holders, view = (frame.get_column(column).to_numpy() for frame in frames)
    span = max((int(values.max()) + 1 for values in (*holders, view) if values.size), default=0)
    shown = np.zeros(span, dtype=np.int64)
    for values in holders:
        shown[code_arrays.indices(values)] += 1  # distinct codes: one each per holder
    reached = shown == len(holders)
    reached[code_arrays.indices(view)] = False
    return not reached.any()
