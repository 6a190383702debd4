"""The where grammar: parsing, attributes, SQL semantics of evaluation."""

from __future__ import annotations

import polars as pl
import pytest

from streamdetect.errors import PredicateError
from streamdetect.model.predicates import (
    And,
    Comparison,
    Membership,
    Not,
    Or,
    attributes_of,
    check_types,
    parse_predicate,
    to_polars,
)


def test_parses_the_issue_example() -> None:
    assert parse_predicate("DOB <> '27/08/66' AND Sex IN ('F', 'M')") == And(
        (Comparison("DOB", "!=", "27/08/66"), Membership("Sex", ("F", "M")))
    )


def test_quoted_names_escapes_numbers_and_precedence() -> None:
    parsed = parse_predicate("\"Health Condition\" NOT IN ('HIV') OR NOT (Age >= 3.5 and Name = 'O''Brien')")
    assert parsed == Or(
        (
            Membership("Health Condition", ("HIV",), negated=True),
            Not(And((Comparison("Age", ">=", 3.5), Comparison("Name", "=", "O'Brien")))),
        )
    )
    assert parse_predicate("a = 1 OR b = 2 AND c = 3") == Or(
        (Comparison("a", "=", 1), And((Comparison("b", "=", 2), Comparison("c", "=", 3))))
    )
    assert list(attributes_of(parsed)) == ["Health Condition", "Age", "Name"]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "a =",
        "a = 1 AND",
        "a == 1",
        "(a = 1",
        "a IN ()",
        "a = b",
        "__import__('os')",
        "a = 1; b = 2",
        "1 = a",
    ],
)
def test_malformed_expressions_are_rejected(text: str) -> None:
    with pytest.raises(PredicateError):
        parse_predicate(text)


def test_sql_three_valued_logic_excludes_nulls() -> None:
    frame = pl.DataFrame({"Sex": ["F", "M", None], "Age": [30, None, 50]})

    def selected(text: str) -> list[int]:
        return frame.with_row_index().filter(to_polars(parse_predicate(text))).get_column("index").to_list()

    assert selected("Sex IN ('F', 'M')") == [0, 1]
    assert selected("Sex NOT IN ('F')") == [1]
    assert selected("NOT Sex = 'F'") == [1]
    assert selected("Age > 40 OR Sex = 'M'") == [1, 2]
    assert selected("Age <> 30") == [2]


def test_dates_compare_with_iso_strings() -> None:
    frame = pl.DataFrame({"Birthday": ["1990-01-01", "2001-05-05"]}).with_columns(pl.col("Birthday").str.to_date())
    expression = to_polars(parse_predicate("Birthday < '2000-01-01'"), frame.schema)
    assert frame.filter(expression).height == 1


def test_type_check_names_the_fault() -> None:
    with pytest.raises(PredicateError, match="numeric"):
        check_types(parse_predicate("Age = 'x'"), {"Age": pl.Int64()})
    with pytest.raises(PredicateError, match="unknown attribute 'Ag'"):
        check_types(parse_predicate("Ag = 1"), {"Age": pl.Int64()})
