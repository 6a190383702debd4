"""The rows a check has seen, per view: distinct, dictionary-encoded, append-only.

Shared by the incremental checks. Append-only matters: a row's position is a stable id (the
association-cover check names projection facts by it), and codes never change once given.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from streamdetect.relational.dictionary import Dictionaries, decode_frame, encode


def frame_to_text(frame: pl.DataFrame) -> str:
    """A frame as base64 Arrow IPC, for JSON envelopes of serialized states."""
    buffer = io.BytesIO()
    frame.write_ipc(buffer)
    return base64.b64encode(buffer.getvalue()).decode()


def frame_from_text(text: str) -> pl.DataFrame:
    """Inverse of :func:`frame_to_text`."""
    return pl.read_ipc(io.BytesIO(base64.b64decode(text)))


@dataclass
class SeenRows:
    """Distinct encoded rows per view, and the dictionaries behind the codes."""

    rows: dict[str, pl.DataFrame] = field(default_factory=dict)
    dictionaries: Dictionaries = field(default_factory=dict)

    def add(self, view: str, frame: pl.DataFrame, attributes: Sequence[str]) -> tuple[pl.DataFrame, int]:
        """Record new rows of ``view``; return the rows not seen before (encoded) and their first position."""
        new = encode(self.dictionaries, frame.select(attributes)).unique(maintain_order=True)
        old = self.rows.get(view)
        if old is None:
            self.rows[view] = new
            return new, 0
        new = new.join(old, on=list(attributes), how="anti", nulls_equal=True, maintain_order="left")
        self.rows[view] = pl.concat([old, new])
        return new, old.height

    def height(self, view: str) -> int:
        """Distinct rows seen of ``view`` (0 before any)."""
        rows = self.rows.get(view)
        return 0 if rows is None else rows.height

    def decoded(self) -> dict[str, pl.DataFrame]:
        """Every view's rows as values, e.g. to replay them into another state."""
        return {name: decode_frame(self.dictionaries, rows) for name, rows in self.rows.items()}

    def to_document(self) -> dict[str, Any]:
        """JSON-ready form (frames as base64 Arrow IPC)."""
        dictionaries = pl.DataFrame(
            [
                pl.Series(name, [values.to_list()], dtype=pl.List(values.dtype))
                for name, values in self.dictionaries.items()
            ]
        )
        return {
            "rows": {name: frame_to_text(frame) for name, frame in self.rows.items()},
            "dictionaries": frame_to_text(dictionaries),
        }

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> SeenRows:
        """Inverse of :meth:`to_document`."""
        dictionaries = frame_from_text(document["dictionaries"])
        return cls(
            rows={name: frame_from_text(text) for name, text in document["rows"].items()},
            dictionaries={name: dictionaries.get_column(name).explode().alias(name) for name in dictionaries.columns},
        )


def versioned_document(data: bytes, version: int, kind: str) -> dict[str, Any]:
    """The JSON document of a serialized state, refusing one of another version."""
    document: dict[str, Any] = json.loads(data)
    if document.get("version") != version:
        raise ValueError(f"{kind} state version {document.get('version')!r}; expected {version}")
    return document
