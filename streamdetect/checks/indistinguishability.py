"""k-SIND: symmetric indistinguishability of the public tuples (Yao, Wang, Wang & Jajodia).

Publisher-side: it needs the private table. The public attributes B are the table's attributes minus
the sensitive ones, assumed a key; for each sensitive attribute P, two B tuples are SIND when they can
swap their P values in every instance without changing any view (Definition 1); SIND is an
equivalence and its classes partition the B tuples; k-SIND holds when every class has k members
(Definition 2).

Exact subcase (Proposition 5): no view's selection mentions P. Then b1 and b2 are SIND iff for every
view q = Π_X σ_C projecting P, Π_{X-{P}} σ_C(b1) = Π_{X-{P}} σ_C(b2), given at least two possible
private values: the class of b is its *signature*, the tuple over views of "not selected" or its
projected values. Views not projecting P reveal nothing about P here and are left out. This is the
partition of Figure 4, in O(|views| · |table|) with hash grouping.

Otherwise (a selection mentions P) the conservative per-view method of section 3.1: b's signature for
q is the set of P values (among those in the table) that make C true once b is substituted, with its
projected values when that set is not empty; equal signatures for every view imply SIND, so classes
can only be split too finely: a violation is never missed (``exact`` false).

Other sensitive attributes are not swapped along with P: in a view they act like public values of b.

Findings: a class smaller than k, or a class whose members can take only one private value (the
intersection, over the views that select it and project P, of the distinct P values of its group in
that view, is a single value: indistinguishable but certain). Incremental over batches of new table
rows: a row's signature depends on that row alone (exact case), so an update adds rows to classes;
the conservative case recomputes signatures when a new P value widens the domain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from streamdetect.checks.findings import Delta, SindFinding, diff
from streamdetect.errors import TopologyError
from streamdetect.model.predicates import literals_of, to_polars
from streamdetect.model.topology import Topology, ViewDefinition

SIGNATURE = "\0signature"
NOT_SELECTED = "\0not selected"


def publisher_settings(topology: Topology, name: str, k: int | None) -> tuple[tuple[str, ...], int]:
    """The public attributes B and the threshold of a publisher-side check; it needs ``table.source``."""
    if topology.table.source is None:
        raise TopologyError(
            f"the {name} check needs the private table: set table.source", file=topology.path, key="table.source"
        )
    config = topology.check_config(name)
    threshold = k if k is not None else (config.k if config is not None else 2)
    return tuple(a for a in topology.table.attributes if a not in topology.table.sensitive), threshold


@dataclass(frozen=True)
class SindClass:
    """One SIND class: its public tuples, the private values its members may take, how it was found."""

    members: tuple[tuple[tuple[str, Any], ...], ...]
    #: private values the members may take, counted up to 2 (1: certain; 0: none consistent)
    possible: int
    views: tuple[str, ...]
    exact: bool


@dataclass
class SindState:
    """The table rows seen so far (B attributes and the sensitive ones)."""

    VERSION = 1
    rows: pl.DataFrame | None = None


@dataclass(frozen=True)
class SindCheck:
    """k-SIND over the views of a table; ``public`` is B, ``sensitive`` the private attributes."""

    views: tuple[ViewDefinition, ...]
    public: tuple[str, ...]
    sensitive: tuple[str, ...]
    k: int = 2
    table_source: str | None = field(default=None, compare=False)

    @classmethod
    def from_topology(cls, topology: Topology, k: int | None = None) -> SindCheck:
        """The check as configured; the table's rows come with the data (``table.source``)."""
        public, threshold = publisher_settings(topology, "sind", k)
        return cls(topology.views, public, topology.table.sensitive, threshold, topology.table.source)

    def exact_for(self, sensitive: str) -> bool:
        """True when no selection mentions ``sensitive`` (Proposition 5 applies)."""
        return all(sensitive not in view.selection_attributes for view in self.views)

    def initialize(self) -> SindState:
        """No rows seen."""
        return SindState()

    def update(self, state: SindState, table_rows: pl.DataFrame) -> Delta[SindFinding]:
        """Add new rows of the private table; return the findings raised and cleared."""
        before = self.result(state) if state.rows is not None else []
        new = table_rows.select([*self.public, *self.sensitive])
        state.rows = new if state.rows is None else pl.concat([state.rows, new])
        duplicates = state.rows.select(self.public).is_duplicated()
        if duplicates.any():
            row = int(duplicates.arg_max() or 0)
            raise TopologyError(
                f"the public attributes ({', '.join(self.public)}) are not a key of the table, as SIND assumes: "
                f"row {row + 1} repeats another row's public values",
                file=self.table_source,
            )
        return diff(before, self.result(state))

    def _signature(self, rows: pl.DataFrame, view: ViewDefinition, sensitive: str, domain: Sequence[Any]) -> pl.Expr:
        projected = [a for a in view.attributes if a != sensitive]
        # A constant column as long as the table (a bare literal would not broadcast inside a struct).
        always = pl.repeat(True, pl.len())
        values = pl.struct(projected) if projected else always
        if view.where is None:
            return values
        if self.exact_for(sensitive):
            return pl.when(to_polars(view.where, rows.schema).fill_null(False)).then(values)
        # Conservative: which values of P satisfy the selection once b is substituted.
        satisfied = [to_polars(view.where, rows.schema, {sensitive: value}).fill_null(False) for value in domain]
        mask = pl.concat_list(satisfied)
        return pl.struct(mask.alias("satisfied"), pl.when(pl.any_horizontal(satisfied)).then(values).alias("values"))

    def result(self, state: SindState) -> list[SindFinding]:
        """Every SIND class below k or with a single possible private value, per sensitive attribute."""
        if state.rows is None or state.rows.is_empty():
            return []
        findings: list[SindFinding] = []
        for sensitive in self.sensitive:
            findings.extend(self._classes(state, sensitive))
        return findings

    def partition(self, state: SindState, sensitive: str) -> list[SindClass]:
        """The SIND classes of the public tuples seen, for one sensitive attribute (Figure 4(c))."""
        if state.rows is None or state.rows.is_empty():
            return []
        rows = state.rows
        exact = self.exact_for(sensitive)
        relevant = [
            v for v in self.views if sensitive in v.attributes or (not exact and sensitive in v.selection_attributes)
        ]
        domain = self._domain(rows, sensitive) if not exact else []
        signatures = rows.with_row_index("\0row").with_columns(
            [self._signature(rows, view, sensitive, domain).alias(f"\0q{i}") for i, view in enumerate(relevant)]
        )
        columns = [f"\0q{i}" for i in range(len(relevant))]
        # Signatures as text keys: structs are not hashable in Python.
        keys = signatures.with_columns(
            [
                pl.col(c).struct.json_encode().alias(c)
                if signatures.schema[c] != pl.Boolean()
                else pl.col(c).cast(pl.String).alias(c)
                for c in columns
            ]
        )
        domain_size = rows.get_column(sensitive).drop_nulls().n_unique()
        allowed = self._group_values(keys, relevant, columns, sensitive)
        blocks = keys.group_by(columns or [pl.lit(0).alias("\0all")]).agg(
            pl.col("\0row"), *[pl.col(c).first().alias(f"{c}\0key") for c in columns]
        )
        classes = []
        public = rows.select(self.public)
        for block in blocks.iter_rows(named=True):
            members = public[sorted(block["\0row"])].sort(self.public).to_dicts()
            constraints = [
                allowed[c][block[f"{c}\0key"]] for c in columns if c in allowed and block[f"{c}\0key"] is not None
            ]
            classes.append(
                SindClass(
                    members=tuple(tuple(member.items()) for member in members),
                    possible=_at_most_two(constraints, domain_size),
                    views=tuple(sorted(view.name for view in relevant)),
                    exact=exact,
                )
            )
        return sorted(classes, key=lambda c: [str(v) for _, v in c.members[0]])

    def _domain(self, rows: pl.DataFrame, sensitive: str) -> list[Any]:
        """Representatives of Dom(P) for the conservative signatures: the table's values, the literals
        the selections compare P with, values beside each literal, and one value unlike all of them.
        More representatives only split classes further, which keeps the check conservative."""
        dtype = rows.schema[sensitive]
        values: set[Any] = set(rows.get_column(sensitive).drop_nulls().to_list())
        literals = {
            v for view in self.views if view.where is not None for a, v in literals_of(view.where) if a == sensitive
        }
        values |= literals
        if dtype.is_numeric():
            step = 1 if dtype.is_integer() else 0.5
            numbers = [v for v in values if isinstance(v, (int, float))]
            values |= {v + d for v in literals if isinstance(v, (int, float)) for d in (-step, step)}
            values |= {max(numbers, default=0) + 1, min(numbers, default=0) - 1}
        elif dtype == pl.String():
            values.add("\0any other value")
        return sorted(values, key=str)

    def _classes(self, state: SindState, sensitive: str) -> list[SindFinding]:
        findings = []
        for block in self.partition(state, sensitive):
            if len(block.members) < self.k:
                reason = f"class of {len(block.members)} public tuple(s), fewer than k = {self.k}"
            elif block.possible <= 1:
                reason = "every member can take only one private value"
            else:
                continue
            findings.append(SindFinding(self.k, sensitive, block.members, block.views, reason, block.exact))
        return findings

    def _group_values(
        self, keys: pl.DataFrame, views: Sequence[ViewDefinition], columns: Sequence[str], sensitive: str
    ) -> dict[str, dict[str, set[Any]]]:
        """Per view projecting P, per signature: the distinct P values its group shows in the view."""
        allowed: dict[str, dict[str, set[Any]]] = {}
        for view, column in zip(views, columns, strict=True):
            if sensitive not in view.attributes:
                continue
            groups = (
                keys.filter(pl.col(column).is_not_null())
                .group_by(column)
                .agg(pl.col(sensitive).drop_nulls().unique().alias("\0values"))
            )
            allowed[column] = {key: set(values) for key, values in groups.iter_rows()}
        return allowed


def _text_key(column: str, dtype: pl.DataType) -> pl.Expr:
    """A signature column as hashable text (null stays null: not selected)."""
    if isinstance(dtype, pl.Struct):
        return pl.col(column).struct.json_encode().alias(column)
    return pl.col(column).cast(pl.String).alias(column)


def _at_most_two(constraints: Sequence[set[Any]], domain_size: int) -> int:
    """How many private values a class may take, counted up to 2 (the intersection of its groups'
    value sets; the table's whole domain when no view constrains it). Intersects smallest first."""
    if not constraints:
        return min(domain_size, 2)
    ordered = sorted(constraints, key=len)
    if len(ordered) == 1:
        return min(len(ordered[0]), 2)
    common = set(ordered[0])
    for values in ordered[1:]:
        common &= values
    return min(len(common), 2)
