"""What a check shows of its findings in a report: sections of blocks of rows, drawn by every rendering
(a terminal's tables, plain text, Markdown). Each check's registration names the function that lays out
its section (:mod:`streamdetect.checks.registry`); :mod:`streamdetect.reporting.document` gathers them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from streamdetect.checks.canonical import value_text
from streamdetect.checks.protocol import CheckSummary

#: Members of a class shown in a row before "+N more".
MEMBERS_SHOWN = 3


@dataclass(frozen=True)
class Block:
    """One table: a title, its columns, the rows shown and how many were left out."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    omitted: int = 0
    warning: bool = False


@dataclass(frozen=True)
class Section:
    """One check: a heading line and its blocks."""

    heading: str
    blocks: tuple[Block, ...]


@dataclass(frozen=True)
class Shown:
    """How findings are shown: each one's number in the report, the ids a baseline accepted, and at most
    ``limit`` rows per block."""

    numbers: Mapping[str, int]
    accepted: frozenset[str] = frozenset()
    limit: int = 20

    def number(self, finding: Any) -> str:
        """The finding's # in the report."""
        return str(self.numbers[finding.id])

    def marked_id(self, finding: Any) -> str:
        """The finding's id, marked when the baseline accepted it."""
        marked: str = finding.id + (" (accepted)" if finding.id in self.accepted else "")
        return marked

    def cut(self, rows: Sequence[tuple[str, ...]]) -> tuple[tuple[tuple[str, ...], ...], int]:
        """The rows shown and how many are left out."""
        return tuple(rows[: self.limit]), max(0, len(rows) - self.limit)

    def block(
        self, title: str, columns: tuple[str, ...], rows: Sequence[tuple[str, ...]], *, warning: bool = False
    ) -> Block:
        """A block of these rows, cut to the limit (it says how many were left out)."""
        shown, omitted = self.cut(rows)
        return Block(title, columns, shown, omitted, warning)


#: ``render(summary, findings, shown)``: a check's section of the report.
Render = Callable[[CheckSummary, Sequence[Any], Shown], Section]


def values_text(values: Sequence[object]) -> str:
    """Values as the report lists them."""
    return ", ".join(value_text(v) for v in values)


def association_cells(finding: Any, shown: Shown) -> tuple[str, ...]:
    """The cells an identifier-to-sensitive finding starts its row with: #, id, E, e, S."""
    return (
        shown.number(finding),
        shown.marked_id(finding),
        finding.identifier_attribute,
        value_text(finding.identifier_value),
        finding.sensitive_attribute,
    )
