"""The exception hierarchy of streamdetect.

One root, :class:`StreamdetectError`; each subclass tells the caller what to do:

* :class:`TopologyError` -- the topology or one of its data files is wrong; fix the input
  (the CLI exits with code 2). It names the file, the key path and what is wrong.
* :class:`PredicateError` -- a ``where`` expression does not parse or does not type-check.
* :class:`UnsupportedCase` -- valid input that a check cannot decide exactly in this version; run the
  other checks, or wait for the subcase (the CLI exits with code 2 and says which).
* :class:`StateError` -- a saved state does not fit: another version, or taken under another topology
  or thresholds; rebuild it from the rows.
"""

from __future__ import annotations


class StreamdetectError(Exception):
    """Root of every error streamdetect raises on purpose."""


class TopologyError(StreamdetectError):
    """Bad input: a malformed topology, an unknown attribute, an unreadable or wrong data file.

    ``file`` is the file at fault, ``key`` the key path inside the topology (``views[1].where``)
    or the column of a data file, ``problem`` what is wrong.
    """

    def __init__(self, problem: str, *, file: str | None = None, key: str | None = None) -> None:
        self.problem = problem
        self.file = file
        self.key = key
        super().__init__(self.render())

    def render(self) -> str:
        where = ": ".join(part for part in (self.file, self.key) if part)
        return f"{where}: {self.problem}" if where else self.problem


class PredicateError(StreamdetectError):
    """A ``where`` expression is malformed or mentions an attribute or type it cannot use.

    ``position`` is the 0-based character offset of the fault when known.
    """

    def __init__(self, problem: str, *, position: int | None = None) -> None:
        self.problem = problem
        self.position = position
        super().__init__(problem if position is None else f"{problem} (at character {position + 1})")


class UnsupportedCase(StreamdetectError):
    """The input is valid but a requested check does not handle its subcase yet."""


class StateError(StreamdetectError):
    """A saved detector state that cannot be restored here: another version, topology or threshold."""
