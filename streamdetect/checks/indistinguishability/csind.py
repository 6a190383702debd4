"""The CSIND relation of k-RSIND (Yao, Wang, Wang & Jajodia, section 3.2) read from keys, not pairs.

Two public tuples b1, b2 with current private values p1, p2 are CSIND when, for every view q, either q
projects P and q((b1, p1)) = q((b2, p1)) and q((b1, p2)) = q((b2, p2)), or q does not and
q((b1, p1)) = q((b1, p2)) and q((b2, p1)) = q((b2, p2)); q(t) is t's projection when t satisfies q's
selection, nothing otherwise.

Reading the definition view by view:

- a view projecting P shows (b, p) as b's projection beside p, or nothing: q((b1, p)) = q((b2, p)) says
  that b1 and b2 are both unselected under p, or both selected with equal projections. Call the tuple of
  these per-view keys b's *image* at p;
- a view not projecting P shows the same projection of b under every value, so q((b, p1)) = q((b, p2))
  says that its selection treats b alike under p1 and p2: b is *stable* between them. A view whose
  selection does not mention P is stable everywhere and plays no part.

Only selections mentioning P make either depend on the value, and only through which rows they keep: two
values that every such selection treats alike for every row are interchangeable. They form a *value
class* (:func:`value_classes`); with no selection mentioning P there is one class. A row is then summed
up by a :class:`Node`: the class of its current value, its image at each class, and whether it is stable
between its own class and each other one. CSIND depends on the nodes alone (:func:`compatible`), rows of
one node are pairwise CSIND, and every edge lies in a *clique group* (:func:`clique_groups`): for two
classes c1, c2 (or one), the nodes of those classes that are stable on both, grouped by their images at
both. So the graph's components come from grouping and union-find, and with one value class the groups
are the nodes themselves: CSIND is an equivalence whose classes are the nodes, and the clique partition
is exact.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import polars as pl

from streamdetect.errors import UnsupportedCase
from streamdetect.model.predicates import to_polars
from streamdetect.model.topology import ViewDefinition

#: Rows x values evaluated to find the value classes (distinct rows on the attributes the selections
#: mentioning P read, times the distinct values of P): beyond, refuse rather than run for minutes.
MAX_EVALUATIONS = 5_000_000


class Node(NamedTuple):
    """What CSIND reads of a row: its value's class, its image at every class (None where no view
    projecting P selects it), and whether it is stable between its class and each class."""

    cls: int
    images: tuple[Hashable, ...]
    stable: tuple[bool, ...]

    def agreed(self) -> dict[int, Hashable]:
        """Its image at each class it is stable on (what a block of its rows alone agrees on)."""
        return {c: image for c, (image, stable) in enumerate(zip(self.images, self.stable, strict=True)) if stable}


@dataclass(frozen=True)
class ValueClasses:
    """The values of P present, grouped by how the selections mentioning P treat every row."""

    of: dict[Any, int]
    representatives: tuple[Any, ...]

    @property
    def count(self) -> int:
        """How many classes (one when no selection mentions P)."""
        return max(len(self.representatives), 1)


def _canonical(values: Sequence[Any]) -> list[Any]:
    """The values in a fixed order (None first, then by text): classes numbered from it depend on the
    values present only."""
    return sorted(values, key=lambda v: (v is not None, str(v)))


def dependent_views(views: Sequence[ViewDefinition], sensitive: str) -> list[ViewDefinition]:
    """The views whose selection mentions ``sensitive``."""
    return [v for v in views if sensitive in v.selection_attributes]


def value_classes(views: Sequence[ViewDefinition], rows: pl.DataFrame, sensitive: str) -> ValueClasses:
    """The classes of the values of ``sensitive`` present in ``rows`` (nulls included): two values are in
    one class when every selection mentioning ``sensitive`` keeps the same rows under either. Evaluated
    over the distinct rows on the attributes those selections read, crossed with the values."""
    values = _canonical(rows.get_column(sensitive).unique().to_list())
    dependent = dependent_views(views, sensitive)
    if not dependent or len(values) <= 1:
        return ValueClasses(dict.fromkeys(values, 0), tuple(values[:1]))
    read = sorted({a for view in dependent for a in view.selection_attributes} - {sensitive})
    combos = rows.select(read).unique().sort(read, nulls_last=True) if read else pl.DataFrame({"\0one": [0]})
    if combos.height * len(values) > MAX_EVALUATIONS:
        raise UnsupportedCase(
            f"rsind: the selections that mention {sensitive!r} would be evaluated for {combos.height:,} distinct "
            f"rows times {len(values):,} values of it; this version stops at {MAX_EVALUATIONS:,}"
        )
    value_column = pl.Series(sensitive, values, dtype=rows.schema[sensitive])
    crossed = (
        combos.with_row_index("\0combo")
        .join(value_column.to_frame().with_row_index("\0value"), how="cross")
        .sort("\0value", "\0combo")
    )
    bits = [
        to_polars(view.where, rows.schema).fill_null(False).cast(pl.String).alias(f"\0b{i}")
        for i, view in enumerate(dependent)
        if view.where is not None
    ]
    signatures = (
        crossed.with_columns(bits)
        .group_by("\0value", maintain_order=True)
        .agg(pl.concat_str([pl.col(f"\0b{i}") for i in range(len(bits))]).str.join("").alias("\0signature"))
        .get_column("\0signature")
        .to_list()
    )
    numbered: dict[str, int] = {}
    of = {}
    representatives: list[Any] = []
    for value, signature in zip(values, signatures, strict=True):
        if signature not in numbered:
            numbered[signature] = len(representatives)
            representatives.append(value)
        of[value] = numbered[signature]
    return ValueClasses(of, tuple(representatives))


def row_nodes(
    rows: pl.DataFrame, views: Sequence[ViewDefinition], sensitive: str, classes: ValueClasses
) -> Iterator[Node]:
    """Each row's :class:`Node`, in order."""
    if rows.is_empty():
        return
    schema = rows.schema
    holding = [v for v in views if sensitive in v.attributes]
    others = [v for v in dependent_views(views, sensitive) if sensitive not in v.attributes]
    representatives = classes.representatives or (None,)

    def selected(view: ViewDefinition, representative: Any) -> pl.Expr:
        # A column as long as the rows even when the condition reads constants only.
        rows_long = pl.repeat(False, pl.len())
        if view.where is None:
            return ~rows_long
        constants = {sensitive: representative} if sensitive in view.selection_attributes else None
        return to_polars(view.where, schema, constants).fill_null(False) | rows_long

    shown = [[a for a in v.attributes if a != sensitive] for v in holding]
    columns: list[pl.Expr] = [pl.col(sensitive)]
    for i, attributes in enumerate(shown):
        columns.extend(pl.col(a).alias(f"\0p{i}\0{a}") for a in attributes)
    for w, representative in enumerate(representatives):
        columns.extend(selected(v, representative).alias(f"\0s{w}\0{i}") for i, v in enumerate(holding))
        columns.extend(selected(v, representative).alias(f"\0o{w}\0{i}") for i, v in enumerate(others))
    frame = rows.select(columns)
    names = frame.columns
    position = {name: i for i, name in enumerate(names)}
    projection_at = [[position[f"\0p{i}\0{a}"] for a in attributes] for i, attributes in enumerate(shown)]
    selection_at = [[position[f"\0s{w}\0{i}"] for i in range(len(holding))] for w in range(len(representatives))]
    other_at = [[position[f"\0o{w}\0{i}"] for i in range(len(others))] for w in range(len(representatives))]
    of = classes.of
    for row in frame.iter_rows():
        projections = [tuple(row[j] for j in at) for at in projection_at]
        images = tuple(tuple(projections[i] if row[j] else None for i, j in enumerate(at)) for at in selection_at)
        own = of.get(row[0], 0)
        if others:
            kept = [tuple(row[j] for j in at) for at in other_at]
            stable = tuple(kept[w] == kept[own] for w in range(len(kept)))
        else:
            stable = (True,) * len(images)
        yield Node(own, images, stable)


def compatible(a: Node, b: Node) -> bool:
    """Whether rows summed up by ``a`` and ``b`` are CSIND (module docstring)."""
    return (
        a.stable[b.cls]
        and b.stable[a.cls]
        and a.images[a.cls] == b.images[a.cls]
        and a.images[b.cls] == b.images[b.cls]
    )


def clique_groups(node: Node) -> Iterator[tuple[Hashable, ...]]:
    """The keys of the clique groups ``node`` is in (module docstring): nodes sharing a key are pairwise
    CSIND, and two CSIND nodes share one (that of their two classes)."""
    own = node.cls
    for other in range(len(node.images)):
        if not node.stable[other]:
            continue
        low, high = min(own, other), max(own, other)
        yield (low, high, node.images[low], node.images[high])
