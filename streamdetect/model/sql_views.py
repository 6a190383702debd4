"""Views declared in SQL: ``SELECT [DISTINCT] columns FROM <the table> [WHERE condition]``, parsed with
sqlglot's PostgreSQL dialect and translated into the view model (a projection and a selection).

What a view is, in the papers (Yao, Wang & Jajodia 2005, section 2), is ``PROJECT_A (SELECT_C (T))`` of the
one private table, with ``C`` a boolean combination of comparisons of attributes with constants. So the
translation accepts exactly that and refuses, naming the construct, anything else: a join or a second
table, a subquery, an aggregate or ``GROUP BY``, a function or an arithmetic expression, ``LIMIT`` (a view
holds every row its selection keeps), a set operation, a comparison of two columns, a null test, ``LIKE``.
No text is evaluated; the tree is walked.

Forms accepted besides the grammar of ``where`` (:mod:`streamdetect.model.predicates`):

* ``a BETWEEN x AND y`` is ``a >= x AND a <= y`` (SQL's definition), ``x < a`` is ``a > x``;
* ``a = ANY (ARRAY[...])`` and ``a <> ALL (ARRAY[...])``, PostgreSQL's own rewriting of ``IN`` and
  ``NOT IN`` in the definitions it stores (``pg_views``), are ``IN`` and ``NOT IN``;
* a cast of a literal to a text, numeric or date type is the literal (``'2020-01-01'::date``, ``DATE
  '2020-01-01'``); a cast of a text column to an unbounded text type (``(job)::text``, as ``pg_views``
  writes comparisons of ``varchar`` columns) is the column. Any other cast changes values and is refused.

Names follow PostgreSQL: a quoted identifier is matched exactly, an unquoted one exactly or else without
regard to case (PostgreSQL folds it to lower case; the table's attributes may be spelled either way).
``DISTINCT`` says the view is a set of rows: computed from the table, its duplicates are dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from streamdetect.errors import PredicateError
from streamdetect.model.predicates import (
    And,
    Comparison,
    Membership,
    Not,
    Operator,
    Or,
    Predicate,
    Scalar,
    date_literal,
)

#: The select's parts a view may have; any other part present is refused by its name here.
_REFUSED_PARTS: Mapping[str, str] = {
    "joins": "a join",
    "laterals": "a LATERAL subquery",
    "group": "GROUP BY (an aggregate)",
    "having": "HAVING (an aggregate)",
    "limit": "LIMIT (a view holds every row its selection keeps)",
    "offset": "OFFSET (a view holds every row its selection keeps)",
    "fetch": "FETCH (a view holds every row its selection keeps)",
    "with": "WITH (a common table expression)",
    "with_": "WITH (a common table expression)",
    "windows": "WINDOW (a window function)",
    "qualify": "QUALIFY",
    "into": "SELECT INTO",
    "locks": "FOR UPDATE",
    "sample": "TABLESAMPLE",
    "kind": "a select kind",
    "connect": "CONNECT BY",
    "prewhere": "PREWHERE",
    "cluster": "CLUSTER BY",
    "distribute": "DISTRIBUTE BY",
    "sort": "SORT BY",
    "settings": "SETTINGS",
    "format": "FORMAT",
    "options": "OPTION",
}
_ALLOWED_PARTS = {"expressions", "from", "from_", "where", "distinct", "order", "hint", "operation_modifiers"}
_COMPARISONS: Mapping[type[exp.Expression], Operator] = {
    exp.EQ: "=",
    exp.NEQ: "!=",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.GT: ">",
    exp.GTE: ">=",
}
_FLIPPED: Mapping[Operator, Operator] = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.Pow, exp.DPipe)
_TEXT_TYPES = {exp.DataType.Type.TEXT, exp.DataType.Type.VARCHAR, exp.DataType.Type.NVARCHAR}
_LITERAL_TYPES = {
    *_TEXT_TYPES,
    exp.DataType.Type.CHAR,
    exp.DataType.Type.NCHAR,
    *exp.DataType.NUMERIC_TYPES,
    exp.DataType.Type.DATE,
}


@dataclass(frozen=True)
class SqlView:
    """A view's definition read from SQL: its projection, its selection, and whether it is a set."""

    attributes: tuple[str, ...]
    where: Predicate | None
    distinct: bool


def view_from_sql(text: str, table: str, attributes: Sequence[str], types: Mapping[str, str] | None = None) -> SqlView:
    """The view ``text`` defines over the table called ``table`` with ``attributes`` (``types``: the declared
    ones, ``str``/``int``/``float``/``date``). Raises :class:`PredicateError` naming the construct that
    makes it something other than a projection and a selection of that table.

    >>> view_from_sql("SELECT name, zip FROM patients WHERE age BETWEEN 30 AND 40", "patients", ["Name", "Zip", "Age"])
    ... # doctest: +NORMALIZE_WHITESPACE
    SqlView(attributes=('Name', 'Zip'),
            where=And(operands=(Comparison(attribute='Age', operator='>=', value=30),
                                Comparison(attribute='Age', operator='<=', value=40))),
            distinct=False)
    """
    try:
        statements = [statement for statement in sqlglot.parse(text, read="postgres") if statement is not None]
    except (ParseError, TokenError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PredicateError(f"not valid SQL: {first}") from None
    if len(statements) != 1:
        raise PredicateError(f"expected one SELECT statement, found {len(statements)}")
    (statement,) = statements
    if isinstance(statement, exp.Create):
        # CREATE VIEW name AS SELECT ...: the SELECT defines it
        return _Translation(table, attributes, types or {}).view(statement.expression)
    return _Translation(table, attributes, types or {}).view(statement)


class _Translation:
    def __init__(self, table: str, attributes: Sequence[str], types: Mapping[str, str]) -> None:
        self.table = table
        self.attributes = tuple(attributes)
        self.types = types
        self.qualifiers: set[str] = set()

    def view(self, statement: object) -> SqlView:
        if isinstance(statement, exp.SetOperation):
            raise PredicateError(f"{type(statement).__name__.upper()} (a set operation) is not a view of one table")
        if not isinstance(statement, exp.Select):
            kind = type(statement).__name__.upper() if statement is not None else "nothing"
            raise PredicateError(f"expected a SELECT statement, found {kind}")
        for part, value in statement.args.items():
            if value in (None, [], False) or part in _ALLOWED_PARTS:
                continue
            construct = _REFUSED_PARTS.get(part, part.upper())
            raise PredicateError(f"{construct} is outside what a view is ({_snippet(value)})")
        self._from(statement.args.get("from_") or statement.args.get("from"))
        distinct = statement.args.get("distinct")
        if isinstance(distinct, exp.Distinct) and distinct.args.get("on") is not None:
            raise PredicateError(f"DISTINCT ON keeps one row per group, not a view: {_snippet(distinct)}")
        attributes = self._projection(statement.expressions)
        where = statement.args.get("where")
        return SqlView(attributes, self._condition(where.this) if where is not None else None, distinct is not None)

    def _from(self, source: exp.Expression | None) -> None:
        if source is None:
            raise PredicateError(f"no FROM: a view selects from the table {self.table!r}")
        table = source.this
        if isinstance(table, exp.Subquery) and not isinstance(table.this, exp.Query):
            raise PredicateError(f"a join is outside what a view is ({_snippet(table)})")  # FROM (a JOIN b ON ...)
        if isinstance(table, exp.Subquery):
            raise PredicateError(f"a subquery in FROM is not the table {self.table!r}: {_snippet(table)}")
        if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier):
            raise PredicateError(f"FROM {_snippet(table)} is not the table {self.table!r}")
        names = [part.name for part in table.parts]
        wanted = self.table.split(".")
        if not _same_name(names[-1], wanted[-1], table.this.quoted) or (
            len(names) > 1 and len(wanted) > 1 and names[:-1] != wanted[:-1]
        ):
            raise PredicateError(f"another table {'.'.join(names)!r}: the views are of the table {self.table!r}")
        self.qualifiers = {names[-1], ".".join(names)}
        if table.alias:
            self.qualifiers = {table.alias}

    def _projection(self, expressions: Sequence[exp.Expression]) -> tuple[str, ...]:
        chosen: list[str] = []
        for expression in expressions:
            if isinstance(expression, exp.Star) or (isinstance(expression, exp.Column) and expression.is_star):
                chosen.extend(self.attributes)
                continue
            column = expression.this if isinstance(expression, exp.Alias) else expression
            if not isinstance(column, exp.Column):
                raise PredicateError(f"{_construct(column)} in the select list: a view projects columns only")
            name = self._column(column)
            if (
                isinstance(expression, exp.Alias)
                and expression.alias != name
                and not _same_name(expression.alias, name, expression.args["alias"].quoted)
            ):
                raise PredicateError(
                    f"renaming a column ({_snippet(expression)}): a view publishes the table's attributes "
                    "under their names"
                )
            if name in chosen:
                raise PredicateError(f"column {name!r} is selected twice")
            chosen.append(name)
        return tuple(chosen)

    def _column(self, column: exp.Column) -> str:
        qualifier = column.table
        if (
            qualifier
            and qualifier not in self.qualifiers
            and not any(qualifier.lower() == known.lower() for known in self.qualifiers)
        ):
            raise PredicateError(f"column {column.sql(dialect='postgres')!r} is of another table than {self.table!r}")
        identifier = column.this
        if not isinstance(identifier, exp.Identifier):
            raise PredicateError(f"{_snippet(column)} is not a column")
        name = identifier.name
        if name in self.attributes:
            return name
        if not identifier.quoted:
            matches = [attribute for attribute in self.attributes if attribute.lower() == name.lower()]
            if len(matches) == 1:
                return matches[0]
        raise PredicateError(f"unknown column {name!r}; the table has {', '.join(self.attributes)}")

    def _condition(self, node: exp.Expression) -> Predicate:  # noqa: PLR0911 -- one answer per SQL form
        if isinstance(node, exp.Paren):
            return self._condition(node.this)
        if isinstance(node, exp.And):
            return And((*_flat(self._condition(node.this), And), *_flat(self._condition(node.expression), And)))
        if isinstance(node, exp.Or):
            return Or((*_flat(self._condition(node.this), Or), *_flat(self._condition(node.expression), Or)))
        if isinstance(node, exp.Not):
            return Not(self._condition(node.this))
        if type(node) in _COMPARISONS:
            return self._comparison(node, _COMPARISONS[type(node)])
        if isinstance(node, exp.In):
            if node.args.get("query") is not None:
                raise PredicateError(f"a subquery in IN: {_snippet(node)}")
            attribute = self._operand_column(node.this, node)
            return Membership(attribute, tuple(self._literal(value, attribute) for value in node.expressions))
        if isinstance(node, exp.Between):
            attribute = self._operand_column(node.this, node)
            low = self._literal(node.args["low"], attribute)
            high = self._literal(node.args["high"], attribute)
            return And((Comparison(attribute, ">=", low), Comparison(attribute, "<=", high)))
        if isinstance(node, exp.Is):
            raise PredicateError(
                f"a null test ({_snippet(node)}): a selection compares values; a null never satisfies one"
            )
        if isinstance(node, (exp.Like, exp.ILike, exp.RegexpLike, exp.SimilarTo)):
            raise PredicateError(f"pattern matching ({_snippet(node)}): a selection compares whole values")
        raise PredicateError(f"{_construct(node)} in WHERE: a selection combines comparisons with constants")

    def _comparison(self, node: exp.Expression, operator: Operator) -> Predicate:
        left, right = node.this, node.expression
        if isinstance(right, exp.Any) or _is_all(right):
            return self._quantified(node, operator, left, right)
        left_column, right_column = self._is_column(left), self._is_column(right)
        if left_column and right_column:
            raise PredicateError(
                f"a comparison of two columns ({_snippet(node)}): a selection compares a column with a constant"
            )
        if right_column:
            left, right, operator = right, left, _FLIPPED[operator]
        attribute = self._operand_column(left, node)
        return Comparison(attribute, operator, self._literal(right, attribute))

    def _quantified(
        self, node: exp.Expression, operator: Operator, left: exp.Expression, right: exp.Expression
    ) -> Predicate:
        """``a = ANY (ARRAY[...])`` (IN) and ``a <> ALL (ARRAY[...])`` (NOT IN), as pg_views writes them."""
        attribute = self._operand_column(left, node)
        values = _array_items(right.this if isinstance(right, exp.Any) else right.expressions[0])
        if values is None:
            raise PredicateError(f"{_snippet(node)}: ANY and ALL are read over an ARRAY of constants only")
        literals = tuple(self._literal(value, attribute) for value in values)
        if isinstance(right, exp.Any) and operator == "=":
            return Membership(attribute, literals)
        if not isinstance(right, exp.Any) and operator == "!=":
            return Membership(attribute, literals, negated=True)
        raise PredicateError(f"{_snippet(node)}: of ANY and ALL only '= ANY' (IN) and '<> ALL' (NOT IN) are read")

    def _is_column(self, node: exp.Expression) -> bool:
        while isinstance(node, (exp.Paren, exp.Cast)):
            node = node.this
        return isinstance(node, exp.Column)

    def _operand_column(self, node: exp.Expression, whole: exp.Expression) -> str:
        """The attribute a comparison reads: a column, parenthesised, or cast to an unbounded text type when
        it is text (what pg_views writes); anything else computes a value."""
        if isinstance(node, exp.Paren):
            return self._operand_column(node.this, whole)
        if isinstance(node, exp.Cast):
            inner = self._operand_column(node.this, whole)
            to = node.to
            if to.this in _TEXT_TYPES and not to.expressions and self.types.get(inner, "str") == "str":
                return inner
            raise PredicateError(f"a cast of column {inner!r} ({_snippet(node)}) changes its values")
        if isinstance(node, exp.Column):
            return self._column(node)
        raise PredicateError(f"{_construct(node)} in {_snippet(whole)}: a selection compares a column with a constant")

    def _literal(self, node: exp.Expression, attribute: str) -> Scalar:
        """A constant: a string, a number (signed), or either cast to a text, numeric or date type."""
        if isinstance(node, exp.Paren):
            return self._literal(node.this, attribute)
        if isinstance(node, exp.Cast):
            value = self._literal(node.this, attribute)
            to = node.to
            if to.this not in _LITERAL_TYPES:
                raise PredicateError(f"{_snippet(node)}: a constant cast to {to.sql(dialect='postgres')} is not read")
            if to.this == exp.DataType.Type.DATE:
                if not isinstance(value, str):
                    raise PredicateError(f"{_snippet(node)}: a date is written as 'YYYY-MM-DD'")
                date_literal(value)
            elif to.this in exp.DataType.NUMERIC_TYPES and isinstance(value, str):
                raise PredicateError(f"{_snippet(node)}: a number is written without quotes")
            return value
        if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
            value = self._literal(node.this, attribute)
            assert not isinstance(value, str)
            return -value
        if isinstance(node, exp.Literal):
            if node.is_string:
                return str(node.this)
            number = node.this
            return float(number) if any(ch in number for ch in ".eE") else int(number)
        if isinstance(node, exp.Null):
            raise PredicateError(f"a comparison with NULL on {attribute!r} is never true; write no such condition")
        if isinstance(node, exp.Boolean):
            raise PredicateError(f"a boolean constant ({_snippet(node)}): attributes hold text, numbers or dates")
        raise PredicateError(f"{_construct(node)} where a constant is compared with {attribute!r}")


def _same_name(name: str, wanted: str, quoted: bool) -> bool:
    return name == wanted or (not quoted and name.lower() == wanted.lower())


def _flat(predicate: Predicate, kind: type[And] | type[Or]) -> tuple[Predicate, ...]:
    return predicate.operands if isinstance(predicate, kind) else (predicate,)


def _is_all(node: exp.Expression) -> bool:
    """``ALL (ARRAY[...])``: sqlglot reads PostgreSQL's ``ALL`` after a comparison as an anonymous call."""
    return isinstance(node, exp.All) or (
        isinstance(node, exp.Anonymous) and str(node.name).upper() == "ALL" and len(node.expressions) == 1
    )


def _array_items(node: exp.Expression) -> list[exp.Expression] | None:
    while isinstance(node, (exp.Paren, exp.Cast)):
        node = node.this
    return list(node.expressions) if isinstance(node, exp.Array) else None


def _construct(node: exp.Expression) -> str:  # noqa: PLR0911 -- one answer per kind of construct
    """What an unsupported node is, in a user's words."""
    if isinstance(node, exp.AggFunc):
        return f"an aggregate ({_snippet(node)})"
    if isinstance(node, exp.Window):
        return f"a window function ({_snippet(node)})"
    if isinstance(node, (exp.Subquery, exp.Select, exp.Exists)):
        return f"a subquery ({_snippet(node)})"
    if isinstance(node, exp.Case):
        return f"a CASE expression ({_snippet(node)})"
    if isinstance(node, _ARITHMETIC):
        return f"an arithmetic expression ({_snippet(node)})"
    if isinstance(node, (exp.Func, exp.Anonymous)):
        return f"a function ({_snippet(node)})"
    return f"{_snippet(node)}"


def _snippet(node: object, width: int = 60) -> str:
    if isinstance(node, list):
        text = " ".join(_snippet(item, width) for item in node)
    else:
        text = node.sql(dialect="postgres") if isinstance(node, exp.Expression) else str(node)
    return text if len(text) <= width else text[: width - 3] + "..."
