"""The worker's settings and their defaults, in a module of their own: the command line shows them in
``--help`` and builds the :class:`WorkerSettings` of a run without loading Faust, the Kafka client or the
checks."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streamdetect.stream.security import KafkaSecurity

#: Records over this many bytes are dead-lettered (``too_large``): Kafka's default largest record
#: (``message.max.bytes``) is about 1 MB.
DEFAULT_MAX_BYTES = 1_000_000

#: Bytes of records written since the last snapshot (and at least 1/64 of the snapshot chain, or all
#: of it after a withdrawal) after which a new snapshot replaces them: a link of the chain holding their
#: pieces, or the state re-encoded (:meth:`~streamdetect.stream.service.DetectorService.snapshot_threshold`).
#: The table stays within about the state plus this (twice the state after a withdrawal), and a restore
#: replays at most that much.
COMPACT_BYTES = 16 << 20
#: Where a worker's state table keeps its local copy (``worker --store``).
STORES = ("memory://", "rocksdb://")
#: Seconds a folded batch id is remembered (to skip a redelivered record) once a snapshot is taken: Kafka
#: redelivers what a worker read and did not commit, within minutes; a week is far beyond that.
REPLAY_RETENTION_S = 7 * 86_400.0


@dataclass(frozen=True)
class WorkerSettings:
    """Everything a worker runs with besides its topology, decided once by the command line (the
    environment's Kafka security settings included) and then only read.

    ``bootstrap``: the brokers, host:port[,host:port...]; ``partitions``: the shape (one stage with 1,
    units over the route topic's partitions with more); ``checks``: the checks run (None: the topology's);
    ``store`` and ``datadir``: Faust's table store; ``web_port``: Faust's web pages on 127.0.0.1, off when
    None (two workers on one host would otherwise both take 6066); ``max_bytes``: records over it are
    dead-lettered; ``session_timeout_s``: how long the group waits for a silent worker before its
    partitions go to the others; ``universal_rows``: above zero, the universal-relation stream is written
    to its topic, at most that many tuples per channel (per unit with several partitions);
    ``coalesce``: at most that many records taken together (those waiting, or arriving within
    ``coalesce_wait_s`` of the end of the previous update) and folded in as few Detector updates as their
    order allows; ``compact_bytes``: a unit's state entries are replaced by a snapshot once that many
    bytes were written since the last one (None: never); ``replay_retention_s``: how long a folded batch
    id is remembered past a snapshot."""

    bootstrap: str
    datadir: Path
    security: KafkaSecurity
    partitions: int = 1
    checks: tuple[str, ...] | None = None
    store: str = "memory://"
    web_port: int | None = None
    max_bytes: int = DEFAULT_MAX_BYTES
    session_timeout_s: float = 30.0
    universal_rows: int = 0
    coalesce: int = 32
    coalesce_wait_s: float = 0.01
    compact_bytes: int | None = COMPACT_BYTES
    replay_retention_s: float | None = REPLAY_RETENTION_S
