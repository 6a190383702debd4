"""Dictionary encoding of attribute values: joins and capped sets work on small integer codes.

Each attribute has one dictionary shared by every view, so equal values get equal codes across views
and a join on codes is the join on values. Codes are positions in the dictionary, which only grows
(new values are appended), so codes already stored in a state never change. Nulls stay null.
Encoding and decoding are O(n) hash joins; the gain is that every later join, ``unique`` and group-by
runs on 4-byte integers instead of strings (on BP at 452k rows: about half the time and memory).
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

Dictionaries = dict[str, pl.Series]
CODE = pl.UInt32()


def encode(dictionaries: Dictionaries, frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with every column replaced by its codes; extends ``dictionaries`` with new values."""
    columns = []
    for name in frame.columns:
        column = frame.get_column(name)
        values = column.drop_nulls().unique().sort()
        known = dictionaries.get(name)
        if known is None:
            known = values.clear()
        elif known.dtype != column.dtype:
            raise TypeError(f"attribute {name!r} arrives as {column.dtype}, earlier as {known.dtype}")
        fresh = values.filter(~values.is_in(known.implode()))
        if fresh.len():
            known = pl.concat([known, fresh])
        dictionaries[name] = known
        mapping = pl.DataFrame({name: known, "\0code": pl.arange(0, known.len(), dtype=CODE, eager=True)})
        coded = frame.select(name).join(mapping, on=name, how="left", maintain_order="left").get_column("\0code")
        columns.append(coded.alias(name))
    return pl.DataFrame(columns, schema=dict.fromkeys(frame.columns, CODE))


def decode(dictionaries: Dictionaries, attribute: str, codes: Sequence[int]) -> list[object]:
    """The values behind ``codes`` of ``attribute``."""
    return dictionaries[attribute].gather(list(codes)).to_list()


def decode_frame(dictionaries: Dictionaries, frame: pl.DataFrame) -> pl.DataFrame:
    """The values behind a frame of codes (nulls stay null)."""
    return pl.DataFrame([dictionaries[name].gather(frame.get_column(name)).alias(name) for name in frame.columns])


def lookup(dictionaries: Dictionaries, frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` in codes without extending the dictionaries: a value never seen gets a null code (as a
    null does; compare with the frame's own nulls to tell them apart). For rows to withdraw."""
    columns = []
    for name in frame.columns:
        known = dictionaries.get(name)
        if known is None or known.dtype != frame.schema[name]:
            columns.append(pl.Series(name, [None] * frame.height, dtype=CODE))
            continue
        mapping = pl.DataFrame({name: known, "\0code": pl.arange(0, known.len(), dtype=CODE, eager=True)})
        coded = frame.select(name).join(mapping, on=name, how="left", maintain_order="left").get_column("\0code")
        columns.append(coded.alias(name))
    return pl.DataFrame(columns, schema=dict.fromkeys(frame.columns, CODE))
