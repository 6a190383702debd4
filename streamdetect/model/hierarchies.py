"""Generalization hierarchies of quasi-identifiers (Huang et al. 2014, Definition 3: a sequence of
many-to-one functions f^1, f^2, ... from values to more general values).

Three kinds, declared per attribute in the topology (``generalization:``):

* ``map``: explicit levels, each a mapping value -> parent (``[{Korea: Asia, Japan: Asia}, {Asia: "*"}]``);
  a value missing from a level's mapping goes to ``*`` there;
* ``mask``: codes such as ZIP: level n replaces the last n characters by ``*`` (``02138`` -> ``0213*``),
  up to the whole code;
* ``intervals``: numbers: level n puts a value in the interval of width ``widths[n-1]`` that holds it
  (``[10, 20]``: 15 -> ``10-19``, then ``0-19``).

Every hierarchy ends in ``*`` (one value for all): generalizing a group to the top always merges it.
The generalization distance of a value is the number of functions applied (Definition 3). Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

TOP = "*"


@dataclass(frozen=True)
class Hierarchy:
    """One attribute's generalization functions: ``kind`` ``map``, ``mask`` or ``intervals``."""

    kind: str
    levels: tuple[Mapping[str, str], ...] = ()
    widths: tuple[float, ...] = ()

    def height(self, value: str | None) -> int:
        """Levels until ``*`` for this value (the last level is always ``*``; a null's is 1)."""
        if value is None:
            return 1
        if self.kind == "mask":
            return max(len(value), 1)
        if self.kind == "intervals":
            return len(self.widths) + 1
        return len(self.levels) + 1

    def generalize(self, value: str | None, level: int) -> str | None:
        """The value after ``level`` generalization functions (level 0: itself; a null becomes ``*`` at
        the first level, so it can join any group at the top)."""
        if level <= 0:
            return value
        if value is None:
            return TOP
        if level >= self.height(value):
            return TOP
        if self.kind == "mask":
            return value[: len(value) - level] + "*" * level
        if self.kind == "intervals":
            width = self.widths[level - 1]
            low = math.floor(float(value) / width) * width
            return f"{_number(low)}-{_number(low + width - (1 if float(width).is_integer() else 0))}"
        current: str = value
        for mapping in self.levels[:level]:
            current = mapping.get(current, TOP)
        return current


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def mask(length: int | None = None) -> Hierarchy:
    """Digit masking from the right (``length`` is informative: each value masks up to its own length)."""
    del length
    return Hierarchy("mask")


def mapping(levels: Sequence[Mapping[str, str]]) -> Hierarchy:
    """Explicit value -> parent levels."""
    return Hierarchy("map", levels=tuple(dict(level) for level in levels))


def intervals(widths: Sequence[float]) -> Hierarchy:
    """Numeric intervals of growing widths."""
    return Hierarchy("intervals", widths=tuple(float(w) for w in widths))


#: Attributes without a declared hierarchy: one step to ``*`` (suppression of the value).
SUPPRESS = Hierarchy("map")
