"""Visibility requirements: monotonic boolean formulas over attributes (De Capitani di Vimercati et al.,
VLDB 2010, Definition 3.1), such as ``Patient OR ZIP`` or ``(Birth AND ZIP) OR SSN``.

``AND`` and ``OR`` (case-insensitive), parentheses, attribute names as bare words or double-quoted
(``"Health Condition"``). ``NOT`` is refused: a request not to see an attribute is a confidentiality
constraint, not a visibility requirement (the paper keeps the two apart, section 3). Parsed by a lark
LALR grammar into a small immutable AST; nothing is evaluated as code.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Union

from lark import Lark, Token, Transformer, UnexpectedInput, v_args

from streamdetect.errors import PredicateError

_GRAMMAR = r"""
?start: disjunction
?disjunction: conjunction (_OR conjunction)*        -> any_
?conjunction: primary (_AND primary)*               -> all_
?primary: attribute
        | "(" disjunction ")"
attribute: NAME | QUOTED_NAME
_OR: /or\b/i
_AND: /and\b/i
NAME: /(?!(and|or|not)\b)[A-Za-z_][A-Za-z0-9_]*/i
QUOTED_NAME: /"([^"]|"")+"/
%import common.WS
%ignore WS
"""


@dataclass(frozen=True)
class Attribute:
    """Satisfied by a fragment holding the attribute."""

    name: str


@dataclass(frozen=True)
class All:
    """Satisfied when one fragment satisfies every operand (``AND``)."""

    operands: tuple[Formula, ...]


@dataclass(frozen=True)
class Any:
    """Satisfied when a fragment satisfies one operand at least (``OR``)."""

    operands: tuple[Formula, ...]


Formula = Union[Attribute, All, Any]


@dataclass(frozen=True)
class VisibilityRequirement:
    """A requirement as written and as parsed."""

    text: str
    formula: Formula

    def __str__(self) -> str:
        return self.text


@v_args(inline=True)
class _ToAst(Transformer[Token, Formula]):
    def attribute(self, token: Token) -> Attribute:
        text = str(token)
        return Attribute(text[1:-1].replace('""', '"') if text.startswith('"') else text)

    def all_(self, *operands: Formula) -> Formula:
        return operands[0] if len(operands) == 1 else All(tuple(operands))

    def any_(self, *operands: Formula) -> Formula:
        return operands[0] if len(operands) == 1 else Any(tuple(operands))


@cache
def _parser() -> Lark:
    return Lark(_GRAMMAR, parser="lalr")


def parse_visibility(text: str) -> Formula:
    """Parse a visibility requirement into its AST. Linear in the length of ``text`` (LALR).

    Raises :class:`PredicateError` with the position of the first unexpected token (``NOT`` included:
    requirements are monotonic).

    >>> parse_visibility('(Birth AND ZIP) or SSN')
    Any(operands=(All(operands=(Attribute(name='Birth'), Attribute(name='ZIP'))), Attribute(name='SSN')))
    """
    if not text or not text.strip():
        raise PredicateError("empty requirement")
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as exc:
        column = getattr(exc, "pos_in_stream", None)
        snippet = text[column : column + 15] if column is not None else ""
        if snippet.lower().startswith("not"):
            raise PredicateError(
                "NOT is not allowed: a visibility requirement is monotonic (say what must not be seen "
                "as a confidentiality constraint)",
                position=column,
            ) from None
        found = f" near {snippet!r}" if snippet else " at the end"
        raise PredicateError(f"syntax error{found}", position=column) from None
    return _ToAst().transform(tree)


def attributes_in(formula: Formula) -> Iterator[str]:
    """Every attribute the formula mentions, in order of appearance (with repeats)."""
    if isinstance(formula, Attribute):
        yield formula.name
    else:
        for operand in formula.operands:
            yield from attributes_in(operand)


def satisfied_by(formula: Formula, fragment: frozenset[str] | set[str]) -> bool:
    """Whether one fragment satisfies the formula (``F -> v`` of Definition 3.2). O(size of the formula)."""
    if isinstance(formula, Attribute):
        return formula.name in fragment
    if isinstance(formula, All):
        return all(satisfied_by(operand, fragment) for operand in formula.operands)
    return any(satisfied_by(operand, fragment) for operand in formula.operands)
