"""One protocol for every check: explicit state, ``update`` by batch, ``merge``, ``result``, a codec.

Modelled on online estimators (river's ``update``/``revert``, quix-streams' ``initialize``/``agg``/
``result``): a check object is configuration only and stateless; its state is a separate value the
caller keeps (a Faust table, a checkpoint, a batch run's local variable). Every check declares what it
needs and promises (:class:`CheckProperties`) so that the engine and the streaming worker can plan
without switching on check names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import polars as pl

from streamdetect.checks.findings import Delta
from streamdetect.model.batch import Batch
from streamdetect.model.codecs import Encoded

S = TypeVar("S")
F = TypeVar("F")
#: ``progress(name, total)`` returns a callback ``(done, total)`` for a progress bar.
ProgressFactory = Callable[[str, int], Callable[[int, int], None]]


#: ``CheckProperties.partition``: the state splits by identifier value (module :mod:`streamdetect.partitioning`).
BY_IDENTIFIER_VALUE = "identifier value"
#: ``CheckProperties.partition``: the findings of each (identifier, sensitive) pair are the check's over a
#: table declaring that pair alone, so each pair is a piece of its own.
BY_PAIR = "identifier and sensitive pair"
#: ``CheckProperties.partition``: one piece per sensitive attribute, each the check examining that attribute
#: alone over every row (:class:`Narrows`).
BY_SENSITIVE = "sensitive attribute"
#: ``CheckProperties.partition``: one piece.
WHOLE = "none"


@dataclass(frozen=True)
class CheckProperties:
    """What a check needs and promises (ARX's privacy criteria declare theirs the same way).

    ``needs_table``: reads the private table's rows (publisher-side); ``retractions``: accepts withdrawn
    rows; ``partition``: the unit its state may be split by across workers (:data:`BY_IDENTIFIER_VALUE`:
    the rows of the views holding an identifier routed by its value, the other views' rows to every piece;
    :data:`BY_PAIR`: one piece per (identifier, sensitive) pair, each the check over a table declaring that
    pair's roles alone, every row; :data:`BY_SENSITIVE`: one piece per sensitive attribute, each the check
    narrowed to it (:class:`Narrows`), every row; :data:`WHOLE`: one piece). Whether a finding is exact is the finding's
    to say (``certain``).
    """

    needs_table: bool
    retractions: bool = False
    partition: str = WHOLE
    #: Why it reads the private table, when that depends on the topology (for the error without one).
    table_reason: str = ""


@dataclass(frozen=True)
class CheckSummary:
    """What one check examined: its threshold, how many channels and (channel, E, S) tasks."""

    name: str
    k: int
    channels: int
    tasks: int
    findings: int


class Check(Protocol, Generic[S, F]):
    """The interface every check implements; see :mod:`streamdetect.checks.registry` for the checks."""

    @property
    def name(self) -> str:
        """The check's registered name."""
        ...

    @property
    def k(self) -> int:
        """Its threshold: fewer than k is a finding."""
        ...

    @property
    def properties(self) -> CheckProperties:
        """What it needs and promises."""
        ...

    def initialize(self) -> S:
        """An empty state: nothing seen."""
        ...

    def validate(self, state: S, batch: Batch) -> str | None:
        """What is wrong with the batch for this state (a withdrawn row that is not published), or None.
        Changes nothing: the Detector asks every check before any update, so a batch is all or nothing."""
        ...

    def update(self, state: S, batch: Batch, progress: ProgressFactory | None = None) -> Delta[F]:
        """Fold a batch into ``state`` (mutated); return the findings raised and cleared."""
        ...

    def merge(self, state: S, other: S) -> Delta[F]:
        """Fold another partition's state into ``state``; return what that raised and cleared."""
        ...

    def result(self, state: S) -> list[F]:
        """Every finding the state holds, in report order."""
        ...

    def encode(self, state: S) -> bytes | Encoded:
        """The state as bytes (versioned), for Faust tables and checkpoints; or as the parts of its bytes
        (:class:`~streamdetect.model.codecs.Encoded`), which a snapshot splices in without joining them."""
        ...

    def decode(self, data: bytes | memoryview) -> S:
        """Inverse of :meth:`encode`; refuses another version. ``data`` may be a memoryview of a larger
        snapshot (a restore reads each check's state in place): read it as it is, or take ``bytes(data)``."""
        ...

    def changes(self, state: S) -> dict[str, bytes]:
        """What to write since the last call, as keyed pieces: append-only pieces for a check whose state
        only grows (``linkage``); a check recomputed from the rows it keeps writes the batches it took
        (:mod:`streamdetect.checks.batch_log`). Either way a write costs the batch, not the state."""
        ...

    def apply_changes(self, state: S, pieces: Mapping[str, bytes]) -> S:
        """A state with :meth:`changes` pieces of another state applied (in key order); may be ``state``."""
        ...

    def summary(self, findings: int) -> CheckSummary:
        """What the check examines (for reports)."""
        ...


@runtime_checkable
class KeepsRows(Protocol):
    """A check whose state keeps every view's rows present (as bags): the Detector hands them out
    (:meth:`~streamdetect.detector.Detector.present_rows`: a restore of the universal-relation stream)."""

    def present_rows(self, state: Any) -> dict[str, pl.DataFrame]:
        """The views' rows present, by view. O(rows kept)."""
        ...


@runtime_checkable
class Withholds(Protocol):
    """A check that can say from its state what it would find were some views never published
    (``check --impact``), without being rerun."""

    def result_without(self, state: Any, views: frozenset[str]) -> list[Any]:
        """The findings of the state as if ``views`` were not published."""
        ...


@runtime_checkable
class Narrows(Protocol):
    """A check split by sensitive attribute (:data:`BY_SENSITIVE`): its findings about one attribute are
    those of the check narrowed to it, run over the same rows."""

    def narrowed(self, sensitive: str) -> Any:
        """The same check reporting only on ``sensitive`` (a check of the same name and state)."""
        ...
