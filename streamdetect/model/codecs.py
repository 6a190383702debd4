"""The codecs states are written with: frames as Arrow IPC bytes, and versioned documents (JSON with frames
and bytes beside it, :func:`encode_document`). Every layer that saves a state uses these."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import partial
from typing import Any

import polars as pl

#: How an Arrow IPC *file* starts (the stream format has no magic: it starts with a message length).
_IPC_FILE_MAGIC = b"ARROW1"
#: How a binary document starts (:func:`encode_document`); the header's length follows in this many bytes.
DOCUMENT_MAGIC = b"streamdetect document\n"
_LENGTH_BYTES = 8
#: The keys of a document's references to its frames and bytes (no name a document uses starts with NUL).
_FRAME, _BYTES = "\0frame", "\0bytes"


def frame_to_ipc(frame: pl.DataFrame) -> bytes:
    """A frame as Arrow IPC stream bytes (a state piece). The stream format, not the file format: polars
    writes a file through a query (0.25 ms for a 300-row piece here) and a stream directly (0.02 ms),
    and an update writes dozens of pieces."""
    return bytes(frame_to_ipc_view(frame))


def frame_to_ipc_view(frame: pl.DataFrame) -> memoryview:
    """:func:`frame_to_ipc` as the writer's own buffer, not copied out of it (for a writer that cuts it into
    parts or chunks)."""
    buffer = io.BytesIO()
    frame.write_ipc_stream(buffer)
    return buffer.getbuffer()


def frame_from_ipc(data: bytes | memoryview) -> pl.DataFrame:
    """Inverse of :func:`frame_to_ipc`; also reads the IPC file format, which pieces written before
    2026-11-27 hold (a state table kept across an upgrade restores). A memoryview (a frame inside a
    document) is copied for polars, which reads no memoryview, and let go once read."""
    if bytes(data[: len(_IPC_FILE_MAGIC)]) == _IPC_FILE_MAGIC:
        return pl.read_ipc(io.BytesIO(data))
    return pl.read_ipc_stream(io.BytesIO(data))


#: Frames whose Arrow IPC bytes exceed this are deferred parts while :func:`deferring`.
DEFER_BYTES = 64 << 10


@dataclass(frozen=True)
class Deferred:
    """A part made again when it is taken (:func:`made`): a large frame's Arrow IPC bytes, made once for
    their length and let go (:func:`deferring`)."""

    length: int
    make: Callable[[], bytes | memoryview]

    def __len__(self) -> int:
        return self.length


#: A part of an encoded document: bytes, or bytes made when taken.
Part = bytes | memoryview | Deferred


def made(part: Part) -> bytes | memoryview:
    """A part's bytes (a deferred part's made now; the frame it encodes is never changed in place, so they
    are the bytes whose length the document's header holds)."""
    if not isinstance(part, Deferred):
        return part
    data = part.make()
    if len(data) != part.length:
        raise RuntimeError(f"a deferred part made {len(data)} bytes, not the {part.length} it was measured at")
    return data


_DEFERRING: ContextVar[int | None] = ContextVar("deferring", default=None)


@contextmanager
def deferring(threshold: int | None = None) -> Iterator[None]:
    """Within it, :func:`document_parts` makes each frame of more than ``threshold`` IPC bytes a
    :class:`Deferred` part: encoded once for its length (the document's header needs every blob's length
    before the first) and again when a writer takes it. A writer that cuts chunks from the parts as it
    sends them (a worker's re-encoded snapshot) then holds one large frame's bytes at a time instead of the
    whole state's, for the cost of encoding the large frames twice. ``threshold``: :data:`DEFER_BYTES` when
    None."""
    token = _DEFERRING.set(DEFER_BYTES if threshold is None else threshold)
    try:
        yield
    finally:
        _DEFERRING.reset(token)


@dataclass(frozen=True)
class Encoded:
    """A binary document not joined into one string yet: its parts in order (:func:`document_parts`). A
    document that holds it as a value takes its parts as they are, and a writer can cut its chunks from
    them: the state's bytes are never copied into one string only to be copied again."""

    parts: list[Part]

    def __len__(self) -> int:
        return sum(len(part) for part in self.parts)

    def joined(self) -> bytes:
        """The document's bytes."""
        return b"".join(made(part) for part in self.parts)

    def __bytes__(self) -> bytes:
        return self.joined()


def document_parts(document: Mapping[str, Any]) -> Encoded:
    """A state's document (JSON values, polars frames, bytes and :class:`Encoded` documents anywhere in it) as
    a binary document's parts: the marker :data:`DOCUMENT_MAGIC`, the header's length, the header (JSON:
    the document with each frame and each byte string replaced by a reference, and their lengths), then the
    frames as Arrow IPC streams (each writer's own buffer) and the byte strings as they are. Nothing in
    base64: states were JSON with base64 frames, a third larger and held in memory three times over while
    written (the texts, the JSON text, its bytes)."""
    blobs: list[Part | Encoded] = []
    threshold = _DEFERRING.get()

    def referenced(value: Any) -> Any:
        if isinstance(value, pl.DataFrame):
            encoded = frame_to_ipc_view(value)
            if threshold is not None and len(encoded) > threshold:
                blobs.append(Deferred(len(encoded), partial(frame_to_ipc_view, value)))
                del encoded
            else:
                blobs.append(encoded)
            return {_FRAME: len(blobs) - 1}
        if isinstance(value, bytes | bytearray | Encoded):
            blobs.append(value if not isinstance(value, bytearray) else bytes(value))
            return {_BYTES: len(blobs) - 1}
        if isinstance(value, Mapping):
            return {key: referenced(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [referenced(item) for item in value]
        return value

    header = json.dumps({"document": referenced(document), "blobs": [len(blob) for blob in blobs]}).encode()
    parts: list[Part] = [DOCUMENT_MAGIC, len(header).to_bytes(_LENGTH_BYTES, "big"), header]
    for blob in blobs:
        parts += blob.parts if isinstance(blob, Encoded) else [blob]
    return Encoded(parts)


def encode_document(document: Mapping[str, Any]) -> bytes:
    """:func:`document_parts` joined: the document's bytes."""
    return document_parts(document).joined()


def decode_document(data: bytes | memoryview, *, views: bool = False) -> dict[str, Any]:
    """Inverse of :func:`encode_document`. A JSON object (a state written before binary documents, its
    frames base64 text) is returned as it is: :func:`as_frame` and :func:`as_bytes` read either. Raises
    ValueError when ``data`` is neither, or is cut short.

    ``views``: its byte strings as memoryviews of ``data`` instead of copies (a reader that decodes them in
    turn, as a Detector's restore does its checks' states, then holds the state's bytes once, not twice);
    they keep ``data`` alive while referenced."""
    whole = memoryview(data)
    if bytes(whole[: len(DOCUMENT_MAGIC)]) != DOCUMENT_MAGIC:
        document = json.loads(bytes(whole))
        if not isinstance(document, dict):
            raise ValueError("not a state document: a JSON value that is not an object")
        return document
    start = len(DOCUMENT_MAGIC)
    length = int.from_bytes(whole[start : start + _LENGTH_BYTES], "big")
    start += _LENGTH_BYTES
    try:
        header = json.loads(bytes(whole[start : start + length]))
        sizes = [int(size) for size in header["blobs"]]
        document = header["document"]
    except (UnicodeDecodeError, KeyError, TypeError) as exc:
        raise ValueError(f"not a state document: its header cannot be read ({exc!r})") from None
    start += length
    if start + sum(sizes) != len(data) or not isinstance(document, dict):
        raise ValueError(
            f"not a state document: {len(data) - start} bytes after its header, which says {sum(sizes)} "
            "(cut short, or not one document)"
        )
    offsets = [start]
    for size in sizes:
        offsets.append(offsets[-1] + size)

    def resolved(value: Any) -> Any:
        if isinstance(value, dict):
            if len(value) == 1 and _FRAME in value:
                at = int(value[_FRAME])
                return frame_from_ipc(whole[offsets[at] : offsets[at + 1]])
            if len(value) == 1 and _BYTES in value:
                at = int(value[_BYTES])
                part = whole[offsets[at] : offsets[at + 1]]
                return part if views else part.tobytes()
            return {key: resolved(item) for key, item in value.items()}
        if isinstance(value, list):
            return [resolved(item) for item in value]
        return value

    decoded: dict[str, Any] = resolved(document)
    return decoded


def as_frame(value: pl.DataFrame | str) -> pl.DataFrame:
    """A frame of a decoded document: itself, or base64 Arrow IPC text (a document written before)."""
    return value if isinstance(value, pl.DataFrame) else frame_from_ipc(base64.b64decode(value))


def as_bytes(value: bytes | memoryview | str) -> bytes | memoryview:
    """Bytes of a decoded document: themselves (or their view), or base64 text (a document written before)."""
    return value if isinstance(value, bytes | memoryview) else base64.b64decode(value)


def versioned_document(data: bytes | memoryview, version: int, kind: str) -> dict[str, Any]:
    """The document of a serialized state (:func:`decode_document`), refusing one of another version."""
    document = decode_document(data)
    if document.get("version") != version:
        raise ValueError(f"{kind} state version {document.get('version')!r}; expected {version}")
    return document
