"""The documents states are written as (model/codecs.py): binary, frames and bytes beside a JSON header;
the JSON documents with base64 frames that states were before still read."""

from __future__ import annotations

import base64
import json

import polars as pl
import pytest

from streamdetect.checks.k_anonymity.association_covers import AssociationCoverCheck, AssociationCoverState
from streamdetect.checks.linkage.state import LinkageState
from streamdetect.model.codecs import (
    DOCUMENT_MAGIC,
    Deferred,
    as_bytes,
    as_frame,
    decode_document,
    deferring,
    document_parts,
    encode_document,
    frame_to_ipc,
    made,
    versioned_document,
)
from streamdetect.model.topology import ViewDefinition
from streamdetect.stream.state_log import Chunks

FRAME = pl.DataFrame({"a": [1, 2, None], "b": ["x", "y", "z"]})


def _equal(left: object, right: object) -> bool:
    if isinstance(left, pl.DataFrame):
        return isinstance(right, pl.DataFrame) and left.equals(right)
    if isinstance(left, dict):
        return isinstance(right, dict) and left.keys() == right.keys() and all(_equal(left[k], right[k]) for k in left)
    if isinstance(left, list | tuple):
        return isinstance(right, list) and len(left) == len(right) and all(map(_equal, left, right))
    return left == right


def test_frames_and_bytes_anywhere_in_a_document_come_back_as_they_were() -> None:
    document = {
        "version": 3,
        "frames": {"first": FRAME, "empty": FRAME.clear()},
        "listed": [["v1", FRAME.head(1)], ["v2", None]],
        "state": b"\x00raw\xff",
        "nested": {"deeper": [{"frame": FRAME.tail(1)}]},
        "text": "plain",
    }
    data = encode_document(document)
    assert data.startswith(DOCUMENT_MAGIC)
    assert b"plain" in data
    assert base64.b64encode(frame_to_ipc(FRAME)) not in data  # nothing in base64
    assert _equal(document, decode_document(data))


def test_frames_deferred_while_deferring_are_made_again_into_the_same_bytes() -> None:
    """Within :func:`deferring`, the frames above the threshold are parts made when taken: the document's
    bytes, and the chunks cut from its parts, are those of the document encoded at once; outside it,
    nothing is deferred."""
    large = pl.DataFrame({"a": list(range(5_000)), "b": [str(i) for i in range(5_000)]})
    document = {"version": 1, "rows": large, "small": FRAME, "nested": {"again": large.tail(2_000)}}
    whole = encode_document(document)
    with deferring(threshold=len(frame_to_ipc(FRAME))):
        parts = document_parts(document).parts
    deferred = [part for part in parts if isinstance(part, Deferred)]
    assert len(deferred) == 2  # the two large frames, not the small one
    assert b"".join(made(part) for part in parts) == whole
    assert Chunks("k", list(parts), 4096).taken() == Chunks("k", [whole], 4096).taken()
    assert not any(isinstance(part, Deferred) for part in document_parts(document).parts)
    assert _equal(document, decode_document(whole))


def test_a_deferred_part_made_at_another_length_is_refused() -> None:
    with pytest.raises(RuntimeError, match="made 3 bytes, not the 4"):
        made(Deferred(4, lambda: b"abc"))


def test_a_document_cut_short_run_on_or_not_one_is_refused() -> None:
    data = encode_document({"version": 1, "rows": FRAME})
    for spoiled in (data[:-1], data + b"\0", data[: len(DOCUMENT_MAGIC) + 3], b"[1, 2]", b"\xff"):
        with pytest.raises(ValueError, match=r"not a state document|Expecting value|codec"):
            decode_document(spoiled)
    with pytest.raises(ValueError, match="rows state version 1; expected 2"):
        versioned_document(data, 2, "rows")


def test_a_json_document_with_base64_frames_written_before_reads_as_one() -> None:
    written_before = json.dumps(
        {"version": 1, "rows": _text(FRAME), "state": base64.b64encode(b"abc").decode()}
    ).encode()
    document = versioned_document(written_before, 1, "rows")
    assert as_frame(document["rows"]).equals(FRAME)
    assert as_bytes(document["state"]) == b"abc"


def test_states_written_before_as_json_restore_the_same_state() -> None:
    """A linkage and an association-cover state in the JSON form of the codecs before binary documents (the
    same keys, each frame base64 text) decode to the states their binary form decodes to."""
    views = (ViewDefinition("v1", ("N", "J")), ViewDefinition("v2", ("J", "D")))
    check = AssociationCoverCheck(views, ("N",), ("D",), 2)
    covers = check.initialize()
    check.add(
        covers, {"v1": pl.DataFrame({"N": ["a", "b"], "J": ["x", "y"]}), "v2": pl.DataFrame({"J": ["x"], "D": ["f"]})}
    )
    for kind, state, reader in (
        ("association-cover", covers, AssociationCoverState.from_bytes),
        ("linkage", LinkageState(seen=covers.seen), LinkageState.from_bytes),
    ):
        binary = state.to_bytes()
        assert binary.startswith(DOCUMENT_MAGIC), kind
        as_json = json.dumps(_texts(decode_document(binary))).encode()
        assert reader(as_json).to_bytes() == binary, kind


def _texts(value: object) -> object:
    """A decoded document as the JSON codecs wrote it: frames as base64 Arrow IPC text."""
    if isinstance(value, pl.DataFrame):
        return _text(value)
    if isinstance(value, dict):
        return {key: _texts(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_texts(item) for item in value]
    return value


def _text(frame: pl.DataFrame) -> str:
    """A frame as the JSON codecs wrote it: base64 Arrow IPC."""
    return base64.b64encode(frame_to_ipc(frame)).decode()
