"""A view's SQL selection, translated into the predicate model, keeps the rows a SQL engine keeps.

Reference: DuckDB runs the WHERE text itself on random rows (nulls included, SQL's three-valued logic);
the translation, compiled to polars and evaluated row by row (as the cell procedure reads it), must keep
exactly those rows. The SQL is drawn in the forms publishers write: constants on either side, BETWEEN,
NOT BETWEEN, IN and NOT IN, NOT, nested AND and OR, names lower-case, upper-case, quoted or qualified.
"""

from __future__ import annotations

import duckdb
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from streamdetect.model.predicates import evaluate, parse_predicate, predicate_text, to_polars
from streamdetect.model.sql_views import view_from_sql

ATTRIBUTES = ("name", "Age", "Health Condition")
TYPES = {"name": "str", "Age": "int", "Health Condition": "str"}
SPELLINGS = {
    "name": ["name", "NAME", "t.name", '"name"', "Name"],
    "Age": ["age", '"Age"', "t.AGE", "AGE"],
    "Health Condition": ['"Health Condition"', 't."Health Condition"'],
}
TEXTS = st.sampled_from(["a", "b", "O'Brien", "", "HIV", "b "])
NUMBERS = st.integers(-3, 3)
OPERATORS = st.sampled_from(["=", "<>", "!=", "<", "<=", ">", ">="])


def _literal(attribute: str) -> st.SearchStrategy[str]:
    if TYPES[attribute] == "int":
        return NUMBERS.map(str)
    return TEXTS.map(lambda text: "'" + text.replace("'", "''") + "'")


@st.composite
def atoms(draw: st.DrawFn) -> str:
    attribute = draw(st.sampled_from(ATTRIBUTES))
    column = draw(st.sampled_from(SPELLINGS[attribute]))
    literal = _literal(attribute)
    form = draw(st.sampled_from(["compare", "flipped", "between", "in"]))
    if form == "compare":
        return f"{column} {draw(OPERATORS)} {draw(literal)}"
    if form == "flipped":
        return f"{draw(literal)} {draw(OPERATORS)} {column}"
    negated = "NOT " if draw(st.booleans()) else ""
    if form == "between":
        return f"{column} {negated}BETWEEN {draw(literal)} AND {draw(literal)}"
    values = draw(st.lists(literal, min_size=1, max_size=3))
    return f"{column} {negated}IN ({', '.join(values)})"


conditions = st.recursive(
    atoms(),
    lambda inner: st.one_of(
        inner.map(lambda c: f"NOT ({c})"),
        st.tuples(inner, st.sampled_from(["AND", "OR"]), inner).map(lambda t: f"({t[0]}) {t[1]} ({t[2]})"),
        st.tuples(inner, inner, inner).map(lambda t: f"{t[0]} AND {t[1]} OR {t[2]}"),
    ),
    max_leaves=6,
)
rows = st.lists(
    st.tuples(st.one_of(st.none(), TEXTS), st.one_of(st.none(), NUMBERS), st.one_of(st.none(), TEXTS)),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(condition=conditions, drawn=rows)
def test_the_translated_selection_keeps_the_rows_sql_keeps(condition: str, drawn: list[tuple[object, ...]]) -> None:
    frame = pl.DataFrame(
        drawn, schema={"name": pl.String, "Age": pl.Int64, "Health Condition": pl.String}, orient="row"
    ).with_row_index("i")
    connection = duckdb.connect()
    connection.execute('CREATE TABLE t (i INTEGER, name VARCHAR, "Age" BIGINT, "Health Condition" VARCHAR)')
    if drawn:
        connection.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", [(i, *row) for i, row in enumerate(drawn)])
    kept_by_sql = sorted(row[0] for row in connection.execute(f"SELECT i FROM t WHERE {condition}").fetchall())
    view = view_from_sql(f"SELECT name FROM t WHERE {condition}", "t", ATTRIBUTES, TYPES)
    assert view.where is not None
    kept = frame.filter(to_polars(view.where, frame.schema)).get_column("i").to_list()
    assert kept == kept_by_sql
    by_rows = [row["i"] for row in frame.iter_rows(named=True) if evaluate(view.where, row) is True]
    assert by_rows == kept_by_sql
    # The translation written back in the where grammar reads back as itself.
    assert parse_predicate(predicate_text(view.where)) == view.where
