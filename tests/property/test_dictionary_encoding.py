"""Encoding through the value index gives the codes and dictionaries the hash join gives."""

from __future__ import annotations

import datetime
from typing import Any
from unittest.mock import patch

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamdetect.relational import dictionary as dictionary_module
from streamdetect.relational.dictionary import Dictionaries, ValueIndex, encode, lookup

values = st.one_of(st.none(), st.sampled_from(["a", "b", "c", "Dan", "é", ""]))
dates = st.one_of(st.none(), st.dates(datetime.date(2000, 1, 1), datetime.date(2000, 1, 9)))
# Temporal values are indexed by their integers: instants a microsecond apart stay apart.
instants = st.one_of(
    st.none(),
    st.sampled_from([datetime.datetime(2000, 1, 1), datetime.datetime(2000, 1, 1, 0, 0, 0, 1)]),
    st.datetimes(datetime.datetime(1999, 12, 31), datetime.datetime(2000, 1, 2)),
)
batches = st.lists(
    st.lists(st.tuples(values, dates, st.one_of(st.none(), st.integers(-3, 3)), instants), min_size=0, max_size=6),
    min_size=1,
    max_size=5,
)


_hashes = dictionary_module._hashes


def _few_hashes(column: pl.Series) -> np.ndarray[Any, np.dtype[np.uint64]]:
    """Three hash values in all: most values share theirs with others."""
    return _hashes(column) % np.uint64(3)


@pytest.mark.parametrize(
    ("merge_floor", "hashes"),
    [(dictionary_module._MERGE_FLOOR, _hashes), (0, _hashes), (0, _few_hashes), (2, _few_hashes)],
    ids=["a-mapping-only", "sorted-at-every-batch", "hashes-clash", "hashes-clash-some-recent"],
)
@settings(max_examples=150, deadline=None)
@given(rows=batches)
def test_indexed_encoding_equals_joined_encoding(
    rows: list[list[tuple[object, object, object, object]]], merge_floor: int, hashes: Any
) -> None:
    """Every way the index holds a value (sorted by hash, or among the values appended since), and values
    whose hashes clash: the codes and dictionaries of the hash join."""
    with (
        patch.object(dictionary_module, "_MERGE_FLOOR", merge_floor),
        patch.object(dictionary_module, "_hashes", hashes),
    ):
        _check_indexed_encoding(rows)


def _check_indexed_encoding(rows: list[list[tuple[object, object, object, object]]]) -> None:
    schema = {"name": pl.String, "born": pl.Date, "score": pl.Int64, "at": pl.Datetime("us")}
    joined: Dictionaries = {}
    indexed: Dictionaries = {}
    index = ValueIndex(ratio=0)  # every batch through the index
    for batch in rows:
        frame = pl.DataFrame(batch, schema=schema, orient="row")
        assert encode(indexed, frame, index).equals(encode(joined, frame))
        assert indexed.keys() == joined.keys()
        for name, dictionary in joined.items():
            assert indexed[name].equals(dictionary)
        # Looking up (for withdrawals) never extends the dictionaries; unseen values get null codes.
        assert lookup(indexed, frame, index).equals(lookup(joined, frame))
        unseen = frame.with_columns(pl.lit("never published").alias("name"), pl.col("score") + 100)
        assert lookup(indexed, unseen, index).equals(lookup(joined, unseen))
