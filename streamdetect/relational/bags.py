"""Bags of rows: views and the private table hold each row as often as it is published."""

from __future__ import annotations

import polars as pl


def remove_occurrences(rows: pl.DataFrame, withdrawn: pl.DataFrame, what: str) -> pl.DataFrame:
    """The bag ``rows`` minus the bag ``withdrawn`` (one occurrence per withdrawn row). Raises ``ValueError``
    naming ``what`` when a row is withdrawn more often than it occurs. O(n) (hash joins)."""
    columns = rows.columns
    have = rows.group_by(columns).len("\0have")
    drop = (
        withdrawn.select(columns)
        .with_row_index("\0first")
        .group_by(columns)
        .agg(pl.len().alias("\0drop"), pl.col("\0first").min())
    )
    matched = drop.join(have, on=columns, how="left", nulls_equal=True)
    short = matched.filter(pl.col("\0have").is_null() | (pl.col("\0have") < pl.col("\0drop")))
    if short.height:
        row = int(short.select(pl.col("\0first").min()).item())
        raise ValueError(f"withdraws a row of {what} more often than it is published (retracted row {row + 1})")
    left = have.join(drop.drop("\0first"), on=columns, how="left", nulls_equal=True).with_columns(
        (pl.col("\0have") - pl.col("\0drop").fill_null(0)).alias("\0n")
    )
    left = left.filter(pl.col("\0n") > 0).with_columns(pl.int_ranges(pl.col("\0n")).alias("\0r")).explode("\0r")
    return left.select(columns)
