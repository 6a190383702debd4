"""The batches a recomputed check took, as keyed, append-only pieces: its changelog.

A check whose state is not append-only (its findings are recomputed from the rows it keeps: k-anonymity,
SIND, RSIND) still writes per batch only what the batch carried: the batch itself (event sourcing). A
replica applies the pieces by folding the same batches into its own state, in order, so a checkpoint is
a snapshot plus the batches since; writing costs the batch, not the state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from streamdetect.model.batch import Batch
from streamdetect.model.codecs import frame_from_ipc, frame_to_ipc


@dataclass
class BatchLog:
    """Batches taken since the last :meth:`take`, and how many were ever written (the next one's number)."""

    pending: list[Batch] = field(default_factory=list)
    written: int = 0

    def record(self, batch: Batch) -> None:
        """Remember a batch the state took (one without rows is not written)."""
        if batch.views or batch.retracted or batch.table is not None or batch.retracted_table is not None:
            self.pending.append(batch)

    def take(self) -> dict[str, bytes]:
        """The pending batches as pieces ``batch/<n>/<part>`` (``views/<view>``, ``retracted/<view>``,
        ``table``, ``retracted_table``), numbered on from the last written. O(size of the batches)."""
        pieces: dict[str, bytes] = {}
        for batch in self.pending:
            prefix = f"batch/{self.written:012d}"
            pieces[f"{prefix}/begin"] = b""  # a batch whose frames are all empty still counts
            for name, frame in batch.views.items():
                pieces[f"{prefix}/views/{name}"] = frame_to_ipc(frame)
            for name, frame in batch.retracted.items():
                pieces[f"{prefix}/retracted/{name}"] = frame_to_ipc(frame)
            if batch.table is not None:
                pieces[f"{prefix}/table"] = frame_to_ipc(batch.table)
            if batch.retracted_table is not None:
                pieces[f"{prefix}/retracted_table"] = frame_to_ipc(batch.retracted_table)
            self.written += 1
        self.pending.clear()
        return pieces

    def replay(self, pieces: Mapping[str, bytes]) -> list[Batch]:
        """The batches of another log's :meth:`take` pieces, in order, counted as written here. Raises
        ``ValueError`` when they do not continue this log (a batch missing) or a key is not a batch's."""
        parts: dict[int, dict[str, bytes]] = {}
        for key, data in pieces.items():
            kind, number, *rest = key.split("/", 2)
            if kind != "batch" or not number.isdigit() or not rest:
                raise ValueError(f"state piece {key!r} is not a batch of a recomputed check's log")
            parts.setdefault(int(number), {})[rest[0]] = data
        batches = []
        for position in sorted(parts):
            if position != self.written:
                raise ValueError(f"state piece of batch {position} but the state holds {self.written}: a gap")
            batches.append(_batch(parts[position]))
            self.written += 1
        return batches


def _batch(parts: Mapping[str, bytes]) -> Batch:
    views, retracted = {}, {}
    table = retracted_table = None
    for part, data in parts.items():
        if part == "begin":
            continue
        frame = frame_from_ipc(data)
        kind, _, name = part.partition("/")
        if kind == "views":
            views[name] = frame
        elif kind == "retracted":
            retracted[name] = frame
        elif kind == "table":
            table = frame
        else:
            retracted_table = frame
    return Batch(views=views, table=table, retracted=retracted, retracted_table=retracted_table)
