"""The ``where`` grammar of view selections: parse to an AST, list attributes, compile to polars.

A safe SQL-style boolean language: comparisons ``= != <> < <= > >=`` of an attribute with a literal,
``IN (...)``, ``NOT IN (...)``, ``AND``, ``OR``, ``NOT``, parentheses, single-quoted strings (``''``
escapes a quote) and numbers. Attribute names are bare words or double-quoted (``"Health Condition"``).
The text is parsed by a LALR grammar (lark) into a small immutable AST; nothing is ever evaluated as
code. Evaluation follows SQL three-valued logic: a comparison with a null is unknown and the row is
not selected.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Literal as TypingLiteral
from typing import Union

import polars as pl
from lark import Lark, Token, Transformer, UnexpectedInput, v_args

from streamdetect.errors import PredicateError

Scalar = Union[str, int, float]
Operator = TypingLiteral["=", "!=", "<", "<=", ">", ">="]

_GRAMMAR = r"""
?start: disjunction
?disjunction: conjunction (_OR conjunction)*        -> or_
?conjunction: negation (_AND negation)*             -> and_
?negation: _NOT negation                            -> not_
         | primary
?primary: comparison
        | membership
        | "(" disjunction ")"
comparison: attribute OPERATOR literal
membership: attribute NEGATED? _IN "(" literal ("," literal)* ")"
attribute: NAME | QUOTED_NAME
literal: STRING | NUMBER

OPERATOR: "<=" | ">=" | "<>" | "!=" | "=" | "<" | ">"
NEGATED.2: /NOT(?![A-Za-z0-9_])/i
_IN.2: /IN(?![A-Za-z0-9_])/i
_AND.2: /AND(?![A-Za-z0-9_])/i
_OR.2: /OR(?![A-Za-z0-9_])/i
_NOT.2: /NOT(?![A-Za-z0-9_])/i
NAME: /[A-Za-z_][A-Za-z0-9_]*/
QUOTED_NAME: /"(?:[^"]|"")+"/
STRING: /'(?:[^']|'')*'/
NUMBER: /[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?/
%ignore /\s+/
"""


@dataclass(frozen=True)
class Comparison:
    """``attribute op value``."""

    attribute: str
    operator: Operator
    value: Scalar


@dataclass(frozen=True)
class Membership:
    """``attribute [NOT] IN (values...)``."""

    attribute: str
    values: tuple[Scalar, ...]
    negated: bool = False


@dataclass(frozen=True)
class Not:
    """``NOT operand``."""

    operand: Predicate


@dataclass(frozen=True)
class And:
    """Conjunction of two or more operands."""

    operands: tuple[Predicate, ...]


@dataclass(frozen=True)
class Or:
    """Disjunction of two or more operands."""

    operands: tuple[Predicate, ...]


Predicate = Union[Comparison, Membership, Not, And, Or]


@v_args(inline=True)
class _ToAst(Transformer[Token, Predicate]):
    def attribute(self, token: Token) -> str:
        text = str(token)
        if token.type == "QUOTED_NAME":
            return text[1:-1].replace('""', '"')
        return text

    def literal(self, token: Token) -> Scalar:
        text = str(token)
        if token.type == "STRING":
            return text[1:-1].replace("''", "'")
        if any(ch in text for ch in ".eE"):
            return float(text)
        return int(text)

    def comparison(self, attribute: str, operator: Token, value: Scalar) -> Comparison:
        op = "!=" if str(operator) == "<>" else str(operator)
        return Comparison(attribute, op, value)  # type: ignore[arg-type]

    def membership(self, attribute: str, *rest: Token | Scalar) -> Membership:
        negated = bool(rest) and isinstance(rest[0], Token) and rest[0].type == "NEGATED"
        values = tuple(v for v in rest if not (isinstance(v, Token) and v.type == "NEGATED"))
        return Membership(attribute, values, negated)

    def not_(self, operand: Predicate) -> Not:
        return Not(operand)

    def and_(self, *operands: Predicate) -> Predicate:
        return operands[0] if len(operands) == 1 else And(tuple(operands))

    def or_(self, *operands: Predicate) -> Predicate:
        return operands[0] if len(operands) == 1 else Or(tuple(operands))


@cache
def _parser() -> Lark:
    return Lark(_GRAMMAR, parser="lalr", maybe_placeholders=False)


def parse_predicate(text: str) -> Predicate:
    """Parse a ``where`` expression into its AST.

    Linear in the length of ``text`` (LALR). Raises :class:`PredicateError` with the position of the
    first unexpected character or token.

    >>> parse_predicate("Sex IN ('F', 'M') AND NOT \\"Health Condition\\" = 'HIV'")  # doctest: +NORMALIZE_WHITESPACE
    And(operands=(Membership(attribute='Sex', values=('F', 'M'), negated=False),
                  Not(operand=Comparison(attribute='Health Condition', operator='=', value='HIV'))))
    """
    if not text or not text.strip():
        raise PredicateError("empty expression")
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as exc:
        column = getattr(exc, "pos_in_stream", None)
        snippet = text[column : column + 15] if column is not None else ""
        found = f" near {snippet!r}" if snippet else " at the end"
        raise PredicateError(f"syntax error{found}", position=column) from None
    return _ToAst().transform(tree)


_BARE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEYWORDS = {"and", "or", "not", "in"}


def predicate_text(predicate: Predicate) -> str:
    """The predicate written in the ``where`` grammar; :func:`parse_predicate` reads it back as it is.

    >>> print(predicate_text(parse_predicate("Sex IN ('F', 'M') AND NOT \\"Ill ness\\" = 'it''s' OR Age >= -3")))
    (Sex IN ('F', 'M') AND NOT ("Ill ness" = 'it''s')) OR Age >= -3
    """
    if isinstance(predicate, Comparison):
        return f"{_name_text(predicate.attribute)} {predicate.operator} {_value_text(predicate.value)}"
    if isinstance(predicate, Membership):
        values = ", ".join(_value_text(value) for value in predicate.values)
        return f"{_name_text(predicate.attribute)} {'NOT IN' if predicate.negated else 'IN'} ({values})"
    if isinstance(predicate, Not):
        return f"NOT ({predicate_text(predicate.operand)})"
    joiner = " AND " if isinstance(predicate, And) else " OR "
    return joiner.join(
        f"({predicate_text(operand)})" if isinstance(operand, (And, Or)) else predicate_text(operand)
        for operand in predicate.operands
    )


def _name_text(name: str) -> str:
    if _BARE_NAME.fullmatch(name) and name.lower() not in _KEYWORDS:
        return name
    return '"' + name.replace('"', '""') + '"'


def _value_text(value: Scalar) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def atoms(predicate: Predicate) -> Iterator[Comparison | Membership]:
    """The comparisons and memberships of the predicate, in order of appearance."""
    if isinstance(predicate, (Comparison, Membership)):
        yield predicate
    elif isinstance(predicate, Not):
        yield from atoms(predicate.operand)
    else:
        for operand in predicate.operands:
            yield from atoms(operand)


def attributes_of(predicate: Predicate) -> Iterator[str]:
    """Every attribute name the predicate mentions, in order of appearance (with repeats)."""
    for atom in atoms(predicate):
        yield atom.attribute


def literals_of(predicate: Predicate) -> Iterator[tuple[str, Scalar]]:
    """Every (attribute, literal) the predicate compares, in order of appearance."""
    yield from _literals(predicate)


def _literals(predicate: Predicate) -> Iterator[tuple[str, Scalar]]:
    for atom in atoms(predicate):
        if isinstance(atom, Comparison):
            yield atom.attribute, atom.value
        else:
            for value in atom.values:
                yield atom.attribute, value


_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def date_literal(text: str) -> datetime.date:
    """The date a literal names: ISO 8601 ``YYYY-MM-DD`` only.

    ``'05/03/1995'`` is refused rather than read day-first or month-first, and so is an impossible date.

    >>> date_literal("1995-03-05")
    datetime.date(1995, 3, 5)
    >>> date_literal("1990-13-45")
    Traceback (most recent call last):
    ...
    streamdetect.errors.PredicateError: '1990-13-45' is not a valid date (month must be in 1..12)
    """
    if not _ISO_DATE.fullmatch(text):
        raise PredicateError(f"{text!r} is not an ISO 8601 date; write dates as 'YYYY-MM-DD'")
    try:
        return datetime.date.fromisoformat(text)
    except ValueError as exc:
        raise PredicateError(f"{text!r} is not a valid date ({exc})") from None


def check_types(predicate: Predicate, dtypes: Mapping[str, pl.DataType]) -> None:
    """Fail unless every attribute is known and every literal fits its attribute's type.

    Strings compare with string and date columns (dates as ISO ``'YYYY-MM-DD'`` only, see
    :func:`date_literal`), numbers with numeric columns.
    """
    for attribute, value in _literals(predicate):
        if attribute not in dtypes:
            raise PredicateError(f"unknown attribute {attribute!r}")
        dtype = dtypes[attribute]
        if dtype == pl.Date() and isinstance(value, str):
            date_literal(value)
        if dtype.is_numeric() and isinstance(value, str):
            raise PredicateError(f"attribute {attribute!r} is numeric but is compared with the string {value!r}")
        if not dtype.is_numeric() and not isinstance(value, str):
            raise PredicateError(f"attribute {attribute!r} is text or date but is compared with the number {value}")


def _literal_expr(attribute: str, value: Scalar, dtypes: Mapping[str, pl.DataType]) -> pl.Expr:
    dtype = dtypes.get(attribute)
    if dtype == pl.Date() and isinstance(value, str):
        return pl.lit(date_literal(value))
    return pl.lit(value)


def _column(attribute: str, types: Mapping[str, pl.DataType], constants: Mapping[str, Scalar]) -> pl.Expr:
    if attribute in constants:
        dtype = types.get(attribute)
        return pl.lit(constants[attribute], dtype=dtype)
    return pl.col(attribute)


def to_polars(  # noqa: PLR0911
    predicate: Predicate,
    dtypes: Mapping[str, pl.DataType] | None = None,
    constants: Mapping[str, Scalar] | None = None,
) -> pl.Expr:
    """Compile the AST to a polars boolean expression (SQL semantics: null is not selected).

    ``constants`` substitutes values for attributes (the condition of a tuple with its private value
    replaced, as the conservative SIND check needs).
    """
    types: Mapping[str, pl.DataType] = dtypes or {}
    fixed: Mapping[str, Scalar] = constants or {}
    if isinstance(predicate, Comparison):
        column = _column(predicate.attribute, types, fixed)
        literal = _literal_expr(predicate.attribute, predicate.value, types)
        match predicate.operator:
            case "=":
                return column == literal
            case "!=":
                return column != literal
            case "<":
                return column < literal
            case "<=":
                return column <= literal
            case ">":
                return column > literal
            case ">=":
                return column >= literal
    if isinstance(predicate, Membership):
        column = _column(predicate.attribute, types, fixed)
        dtype = types.get(predicate.attribute)
        is_date = dtype == pl.Date()
        values: list[object] = [
            date_literal(value) if is_date and isinstance(value, str) else value for value in predicate.values
        ]
        inside = column.is_in(pl.Series(values, dtype=dtype).implode() if dtype is not None else values)
        # is_in yields false (not null) on a null cell; SQL says unknown, so exclude nulls explicitly.
        inside = pl.when(column.is_null()).then(None).otherwise(inside)
        return ~inside if predicate.negated else inside
    if isinstance(predicate, Not):
        return ~to_polars(predicate.operand, types, fixed)
    combined = [to_polars(operand, types, fixed) for operand in predicate.operands]
    result = combined[0]
    for expression in combined[1:]:
        result = (result & expression) if isinstance(predicate, And) else (result | expression)
    return result


def _compare(operator: Operator, value: Scalar | datetime.date, target: Scalar | datetime.date) -> bool:
    match operator:
        case "=":
            return value == target
        case "!=":
            return value != target
        case "<":
            return value < target  # type: ignore[operator]
        case "<=":
            return value <= target  # type: ignore[operator]
        case ">":
            return value > target  # type: ignore[operator]
        case ">=":
            return value >= target  # type: ignore[operator]


def is_date(value: object) -> bool:
    """Whether ``value`` is a date (a day, not a time of day)."""
    return isinstance(value, datetime.date) and not isinstance(value, datetime.datetime)


@cache
def _date_of(text: str) -> datetime.date | str:
    """The date an ISO literal names; the text itself when it names none (then it equals no date)."""
    try:
        return date_literal(text)
    except PredicateError:
        return text


@cache
def _dates_of(values: tuple[Scalar, ...]) -> frozenset[Scalar | datetime.date]:
    return frozenset(_date_of(v) if isinstance(v, str) else v for v in values)


def evaluate(predicate: Predicate, row: Mapping[str, Scalar | None]) -> bool | None:  # noqa: PLR0911
    """The predicate on one row of Python values, with SQL's three-valued logic (None: unknown).

    Used where rows are assignments being reasoned about (the cells of Yao et al.'s Figure 5),
    not data frames. A date meets a literal as the date its ISO text names (as :func:`to_polars` reads
    it). O(size of the predicate).
    """
    if isinstance(predicate, Comparison):
        value = row.get(predicate.attribute)
        if value is None:
            return None
        literal: Scalar | datetime.date = predicate.value
        if is_date(value) and isinstance(literal, str):
            literal = _date_of(literal)  # a date attribute's literal is ISO text, checked when loaded
        if isinstance(value, str) != isinstance(literal, str):
            return None
        return _compare(predicate.operator, value, literal)
    if isinstance(predicate, Membership):
        value = row.get(predicate.attribute)
        if value is None:
            return None
        values = predicate.values
        if is_date(value):
            return (value in _dates_of(values)) != predicate.negated
        return (value in values) != predicate.negated
    if isinstance(predicate, Not):
        inner = evaluate(predicate.operand, row)
        return None if inner is None else not inner
    results = [evaluate(operand, row) for operand in predicate.operands]
    if isinstance(predicate, And):
        if any(r is False for r in results):
            return False
        return None if any(r is None for r in results) else True
    if any(r is True for r in results):
        return True
    return None if any(r is None for r in results) else False
