"""The worker's state log: the entries a folded record writes to the Faust table (keys, packing, chunking
to the producer's limit), the snapshots that replace them (compaction), and where each record was read
(:class:`Source`). :class:`~streamdetect.stream.service.DetectorService` writes and restores it."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from streamdetect.model.codecs import (
    DOCUMENT_MAGIC,
    Encoded,
    Part,
    decode_document,
    document_parts,
    frame_from_ipc,
    frame_to_ipc_view,
    made,
)

log = logging.getLogger(__name__)

#: Entries of a record besides the Detector's pieces (which are ``<check>/<piece>``).
FINGERPRINT_KEY = "meta/fingerprint"
DTYPES_KEY = "meta/dtypes"
UNIVERSAL_KEY = "meta/universal"
#: The offset of the (route) record an entry folded in: where a unit's input stands.
OFFSET_KEY = "meta/offset"
#: ``meta/source/<topic>:<partition>``: the offset after the last record of that view topic partition
#: handled (folded, a replay, a dead letter): a record further on means the consumer skipped the records
#: between (:meth:`~streamdetect.stream.routing.Units.source_gap`, and the one-stage worker's
#: :class:`~streamdetect.stream.worker.catch_up.Skipped`).
SOURCE_PREFIX = "meta/source/"
APPLIED_PREFIX = "applied/"
#: The table holds one entry per record folded in, ``record/<n>``: its pieces, packed (one changelog
#: message per record, not one per piece: a BP batch writes some fifty pieces).
RECORD_PREFIX = "record/"
#: A snapshot, ``snapshot/<n>``: the state after the records numbered below ``n``, which it replaces (they
#: are deleted once it is written, and the compacted changelog forgets them). Snapshots form a chain: its
#: first holds a Detector snapshot (``meta/detector``, or none: the empty state) and the Detector's pieces
#: written after it (``piece/<key>``); each later one the number of the one before (``meta/extends``) and
#: the pieces written since that one. Every check's state is append-only without withdrawals, so a chain
#: link only copies the pieces of the records it replaces, never the state before them.
SNAPSHOT_PREFIX = "snapshot/"
DETECTOR_KEY = "meta/detector"
EXTENDS_KEY = "meta/extends"
#: A chain this long is replaced by a snapshot of the Detector re-encoded. Each link holds at least
#: ``--compact-bytes`` and 1/64 of the chain before it
#: (:attr:`~streamdetect.stream.service.DetectorService.snapshot_threshold`): at the default 16 MiB the
#: links are 16 MiB until the chain reaches 1 GiB, and a full chain has grown about e-fold since its first
#: link, so it is re-encoded at about 1, 2.7, 7.4 GiB of state (each byte about 1.6 times over), and the
#: pieces kept for the next link stay within 1/64 of the state.
CHAIN_LINKS = 64
PIECE_PREFIX = "piece/"
#: In a record that withdrew rows: the pieces since the last snapshot hold a history, not only the state.
WITHDREW_KEY = "meta/withdrew"
APPLIED_KEY = "meta/applied"
#: What the last fold announced on the findings topic: the ids of the findings it raised and cleared (per
#: check), with the publication they are attributed to. The state is written before the events are sent,
#: so a worker killed in between leaves a state whose last fold's events may not have gone: whoever
#: restores the state sends them again (:meth:`~streamdetect.stream.service.DetectorService.restore`).
ANNOUNCED_KEY = "meta/announced"
#: With compaction deferred to idle time (:attr:`DetectorService.defer_compaction`): a snapshot is forced in
#: the update path only once this many times the threshold was written (a worker never idle still
#: compacts: its table stays within about three times the state), and taken when idle once this fraction
#: of the threshold was (a quiet moment after a burst takes the snapshot the burst would have forced).
FORCED_FACTOR = 2
IDLE_FRACTION = 0.5


def pack_entries(entries: Mapping[str, bytes]) -> bytes:
    """Several named byte strings as one (an Arrow IPC frame of keys and values)."""
    return bytes(packed_entries(entries))


def packed_entries(entries: Mapping[str, bytes]) -> memoryview:
    """:func:`pack_entries` as the writer's own buffer, not copied out of it (for a writer that cuts it into
    chunks: a snapshot's link)."""
    return frame_to_ipc_view(
        pl.DataFrame({"key": list(entries), "value": pl.Series(list(entries.values()), dtype=pl.Binary)})
    )


def unpack_entries(data: bytes) -> dict[str, bytes]:
    """Inverse of :func:`pack_entries`."""
    frame = frame_from_ipc(data)
    return dict(zip(frame.get_column("key").to_list(), frame.get_column("value").to_list(), strict=True))


@dataclass(frozen=True)
class Source:
    """Where a view record was published: its topic, partition and offset."""

    topic: str
    partition: int
    offset: int

    @property
    def key(self) -> str:
        """The topic partition, ``topic:partition`` (Kafka topic names have no colon)."""
        return f"{self.topic}:{self.partition}"

    def encode(self) -> bytes:
        return f"{self.key}:{self.offset}".encode()

    @classmethod
    def decode(cls, raw: bytes) -> Source:
        """The source a header gives; ValueError when it is not ``topic:partition:offset``."""
        topic, partition, offset = raw.decode().rsplit(":", 2)
        return cls(topic, int(partition), int(offset))


def chunked(key: str, packed: bytes, limit: int) -> dict[str, bytes]:
    """One table entry, or, when it exceeds ``limit`` bytes (a Kafka record's size), its bytes in chunks
    ``<key>.<i>-<count>``: restore takes an entry only when every chunk of it is there (a worker killed
    between chunks leaves an incomplete entry, ignored, and its records are folded again)."""
    return dict(_pieces(key, [packed], limit))


def snapshot_chunks(key: str, entries: dict[str, bytes | Encoded], limit: int) -> Chunks:
    """A snapshot entry: ``entries`` as a binary document (:func:`~streamdetect.model.codecs.document_parts`:
    the byte strings as they are, a Detector snapshot's parts spliced in), to be cut into :func:`chunked`
    chunks straight from its parts as they are written (:class:`Chunks`). ``entries`` is emptied: the state
    is then held once in its encoded parts, each let go once its chunks are cut, and about a group of
    chunks beside it (cut whole first, the chunks held it a second time, and the broker's batches and a
    RocksDB write a third and a fourth)."""
    parts = document_parts({"entries": entries}).parts
    entries.clear()
    return Chunks(key, parts, limit)


class Chunks:
    """A large table entry's chunks (:func:`chunked`'s keys and bytes), cut from its parts when taken
    (:meth:`groups`): the keys and the size are known before, and each part is let go once cut. Taken once."""

    def __init__(self, key: str, parts: list[Part], limit: int) -> None:
        self._key, self._parts, self._limit = key, parts, limit
        self.size = sum(len(part) for part in parts)
        room = _room(limit)
        count = -(-self.size // room)
        self.keys = [key] if self.size <= room else [_chunk_key(key, i, count) for i in range(count)]
        self._taken = False

    def groups(self, group_bytes: int) -> Iterator[dict[str, bytes]]:
        """The chunks in order, in groups of about ``group_bytes`` (at least one chunk each)."""
        if self._taken:
            raise RuntimeError(f"the chunks of {self._key} were taken already")
        self._taken = True
        parts, self._parts = self._parts, []
        group: dict[str, bytes] = {}
        held = 0
        for name, chunk in _pieces(self._key, parts, self._limit):
            group[name] = chunk
            held += len(chunk)
            if held >= group_bytes:
                yield group
                group, held = {}, 0
        if group:
            yield group

    def taken(self) -> dict[str, bytes]:
        """Every chunk at once (for a caller that keeps them all anyway)."""
        return {name: chunk for group in self.groups(self.size + 1) for name, chunk in group.items()}


def _room(limit: int) -> int:
    """A chunk's bytes under a record's ``limit``, with room for the key and the record's overhead."""
    return max(limit - 1024, 1024)


def _chunk_key(key: str, index: int, count: int) -> str:
    return f"{key}.{index:04d}-{count:04d}"


def _pieces(key: str, parts: list[Part], limit: int) -> Iterator[tuple[str, bytes]]:
    """:func:`chunked`'s entry or chunks, from the entry's bytes in ``parts`` (consumed: each part is made
    when reached, and let go once its chunks are cut), one at a time."""
    size = _room(limit)
    total = sum(len(part) for part in parts)
    if total <= size:
        joined = b"".join(made(part) for part in parts)
        parts.clear()
        yield key, joined
        return
    count = -(-total // size)
    index = 0
    pending: list[memoryview] = []
    held = 0
    parts.reverse()
    while parts:
        part = memoryview(made(parts.pop()))
        while part:
            taken = part[: size - held]
            pending.append(taken)
            held += len(taken)
            part = part[len(taken) :]
            if held == size:
                chunk = b"".join(pending)
                pending, held = [], 0
                yield _chunk_key(key, index, count), chunk
                index += 1
        del part
    if pending:
        yield _chunk_key(key, index, count), b"".join(pending)


class LookedUp(Mapping[str, bytes]):
    """The entries of ``source`` under other keys (``keys``: each key here to its key there), each value
    looked up in ``source`` when asked: a reader that takes one value at a time (:func:`whole_entries`)
    then never holds them all, over a store that reads them on demand (a worker's RocksDB table)."""

    def __init__(self, source: Mapping[Any, bytes], keys: dict[str, Any]) -> None:
        self.source, self.keys_there = source, keys

    def __getitem__(self, key: str) -> bytes:
        return self.source[self.keys_there[key]]

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys_there)

    def __len__(self) -> int:
        return len(self.keys_there)


def read_entries(data: bytes) -> dict[str, bytes]:
    """The entries of a snapshot (:func:`snapshot_chunks`), or of a record or a snapshot packed as a frame
    (:func:`pack_entries`: records, and snapshots written before). A snapshot's Detector (``meta/detector``,
    nearly all of it) is a view of ``data``, read in place by the restore, not a copy."""
    if data.startswith(DOCUMENT_MAGIC):
        entries = decode_document(data, views=True)["entries"]
        return {key: value if key == DETECTOR_KEY else value.tobytes() for key, value in entries.items()}
    return unpack_entries(data)


def whole_entries(written: Mapping[str, bytes], wanted: Callable[[int], bool] = lambda _: True) -> dict[int, bytes]:
    """The table's entries by number (keys without the prefix: ``<n>`` or chunks ``<n>.<i>-<count>``),
    chunks put back together; an entry with a chunk missing is left out, and so is one whose number is
    not ``wanted``. Each value is looked up once, when its entry is put together: over a store that reads
    them on demand (:class:`LookedUp`) the chunks of an entry are
    let go as they are appended, and the state is not held twice."""
    whole: dict[int, bytes] = {}
    chunks: dict[int, dict[int, tuple[int, str]]] = {}
    for key in written:
        digits, _, chunk = key.partition(".")
        if not wanted(int(digits)):
            continue
        if not chunk:
            whole[int(digits)] = written[key]
            continue
        index, _, total = chunk.partition("-")
        chunks.setdefault(int(digits), {})[int(index)] = (int(total), key)
    for number, parts in chunks.items():
        count = next(iter(parts.values()))[0]
        if sorted(parts) == list(range(count)):
            joined = bytearray()
            for i in range(count):
                joined += written[parts[i][1]]
            whole[number] = joined  # type: ignore[assignment]  # read as bytes: startswith, slices, views
        else:
            log.warning("state entry %d is incomplete (%d of %d chunks): left out", number, len(parts), count)
    return whole


def latest_chain(snapshots: Mapping[int, bytes]) -> list[tuple[int, dict[str, bytes]]]:
    """The chain of the latest snapshot whose links are all whole (``snapshots``: whole entries by number,
    :func:`whole_entries`), unpacked, first link first; empty when there is none. A snapshot whose chain
    lacks a link (none is deleted before a snapshot that no longer needs it is written) is passed over."""
    for number in sorted(snapshots, reverse=True):
        chain: list[tuple[int, dict[str, bytes]]] = []
        at: int | None = number
        while at is not None and at in snapshots:
            entry = read_entries(snapshots[at])
            chain.append((at, entry))
            extends = entry.get(EXTENDS_KEY)
            at = int(extends) if extends is not None else None
            if at is not None and at >= chain[-1][0]:
                break  # a link names itself or a later one: not a chain
        if at is None:
            return chain[::-1]
        log.warning("snapshot %d extends snapshot %d, which is not in the table: passed over", number, at)
    return []


def extend_segments(segments: list[dict[str, bytes]], entry: Mapping[str, bytes]) -> None:
    """Add an entry's Detector pieces (in the order written) to ``segments``, the fewest applications
    that keep their order: a withdrawal's pieces (``.../unlinked/...``: drop pairs, then append) are
    applied after everything written before them and before anything written after, as appending
    positions restart below earlier ones once pairs are dropped. Pieces of the other entries gather in
    the last segment (their keys are unique: every check's pieces are numbered)."""
    pieces = {key: value for key, value in entry.items() if not key.startswith(("meta/", APPLIED_PREFIX))}
    if any("/unlinked/" in key for key in pieces):
        segments += [pieces, {}]
    else:
        segments[-1].update(pieces)
