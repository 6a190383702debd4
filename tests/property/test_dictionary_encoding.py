"""Encoding through the value index gives the codes and dictionaries the hash join gives."""

from __future__ import annotations

import datetime

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

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


@settings(max_examples=150, deadline=None)
@given(batches)
def test_indexed_encoding_equals_joined_encoding(rows: list[list[tuple[object, object, object, object]]]) -> None:
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
