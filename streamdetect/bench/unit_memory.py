"""`streamdetect bench unit`: one unit of a partition plan folded as a worker folds it, and the process's memory.

`bench partition` reports each unit's state in bytes; a worker's process holds more: the unit's service, the
table of its state's entries (in memory, or in RocksDB), what folding, snapshots and restores allocate on
the way, and what the allocators keep. This runs one unit the way a worker holding its partition does and
reads the process's resident memory (``/proc/self/statm``, sampled every few milliseconds), phase by phase:

- **fold**: the unit's shares of the micro-batches (what the worker's routing hands it), read one at a
  time from a spool on disk written first (as records come from the broker: the rows are never all in
  memory), each folded by the unit's :class:`~streamdetect.stream.service.DetectorService`, its table writes
  and deletes applied to the store: ``memory://`` a dict, ``rocksdb://`` RocksDB opened with the worker's
  options (:data:`~streamdetect.stream.worker.app.ROCKSDB_OPTIONS`) in a temporary folder;
- **withdraw**: one row the unit folded withdrawn;
- **snapshot**: the snapshot a withdrawal makes due (``compact``), which re-encodes the state;
- **restore**: a fresh process restores a replacement service from the store's entries, as a worker that
  takes over the partition does (a memory store's entries read into a dict first, as Faust's memory store
  holds them after reading the changelog; RocksDB's read in place, one value at a time).

The input is read and split in the calling process, and each share written to the spool; the fold and
withdraw phases then run in a fresh process, and the restore in another (spawned: neither ever held the
input), each with the worker's settings of the C library's malloc and of polars' allocator
(:mod:`streamdetect.stream.allocators`), as the worker command sets them. The figures are the whole process's:
the interpreter and the libraries loaded count (``baseline_bytes``, read by the folding process before its
first record).
"""

from __future__ import annotations

import datetime as dt
import multiprocessing
import queue
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import rocksdict
from faust.stores.rocksdb import RocksDBOptions

from streamdetect.bench.incremental import fed_inputs, micro_batches
from streamdetect.errors import StreamdetectError
from streamdetect.model.batch import Batch
from streamdetect.model.topology import Topology
from streamdetect.partitioning import Plan, Unit, plan
from streamdetect.stream.allocators import return_freed_memory, return_polars_freed_memory
from streamdetect.stream.records import Publication
from streamdetect.stream.routing import unit_service
from streamdetect.stream.service import DetectorService, Outcome
from streamdetect.stream.settings import STORES
from streamdetect.stream.state_log import LookedUp
from streamdetect.stream.worker.app import ROCKSDB_OPTIONS
from streamdetect.stream.worker.outputs import SNAPSHOT_GROUP_BYTES

#: Where the kernel tells a process its resident memory (Linux).
STATM = Path("/proc/self/statm")
#: Seconds between two readings of the resident memory.
SAMPLE_S = 0.005
_PAGE = 4096


def resident_bytes() -> int:
    """The process's resident memory now (Linux: :data:`STATM`)."""
    with open(STATM, encoding="ascii") as statm:
        return int(statm.read().split()[1]) * _PAGE


class _Peak:
    """The largest resident memory read while a phase runs (a thread reads it every :data:`SAMPLE_S`)."""

    def __init__(self) -> None:
        self.bytes = resident_bytes()
        self._running = True
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while self._running:
            self.bytes = max(self.bytes, resident_bytes())
            time.sleep(SAMPLE_S)

    def stop(self) -> int:
        self._running = False
        self._thread.join()
        self.bytes = max(self.bytes, resident_bytes())
        return self.bytes


@contextmanager
def _phase(into: dict[str, Any], name: str) -> Iterator[None]:
    """Record a phase's peak and final resident bytes and its seconds under ``name``."""
    began, peak = time.perf_counter(), _Peak()
    yield
    into[name] = {"peak_bytes": peak.stop(), "end_bytes": resident_bytes(), "seconds": time.perf_counter() - began}


class _Store:
    """The table of a unit's entries: writes and deletes applied as the worker's store takes them."""

    def __init__(self, kind: str, folder: Path) -> None:
        self.folder = folder
        self.memory: dict[str, bytes] = {}
        self.rocks: Any = _open_rocksdb(folder) if kind == "rocksdb://" else None

    def apply(self, writes: Mapping[str, bytes], deletes: Sequence[str]) -> None:
        if self.rocks is None:
            self.memory.update(writes)
            for key in deletes:
                self.memory.pop(key, None)
            return
        batch = rocksdict.WriteBatch(raw_mode=True)
        for key, value in writes.items():
            batch.put(key.encode(), value)
        for key in deletes:
            batch.delete(key.encode())
        self.rocks.write(batch)

    def items(self) -> Iterator[tuple[str, bytes]]:
        if self.rocks is None:
            yield from self.memory.items()
            return
        for key, value in self.rocks.items():
            yield key.decode(), value

    def bytes(self) -> int:
        return sum(len(value) for _, value in self.items())

    def persist(self, target: Path) -> None:
        """The entries in a RocksDB folder ``target`` for the restoring process (a RocksDB store's own
        files moved there, a memory store's written), the store closed."""
        if self.rocks is None:
            rocks = _open_rocksdb(target)
            for key, value in self.memory.items():
                rocks[key.encode()] = value
            rocks.close()
            self.memory.clear()
            return
        self.rocks.close()
        self.rocks = None
        shutil.move(self.folder, target)


def _open_rocksdb(folder: Path) -> Any:
    """A RocksDB database at ``folder`` opened as the worker's store opens it (Faust's options, the
    worker's cache and buffer sizes), keys and values as bytes."""
    return RocksDBOptions(**ROCKSDB_OPTIONS, use_rocksdict=True).open(folder)


@dataclass(frozen=True)
class _Spooled:
    """One micro-batch share on disk: its input (None: the table) and its file."""

    view: str | None
    path: Path


def _unit_of(split: Plan, name: str | None) -> Unit:
    units = split.units()
    if name is None and len(units) == 1:
        return units[0]
    chosen = next((unit for unit in units if unit.name == name), None)
    if chosen is None:
        listed = ", ".join(unit.name for unit in units)
        what = f"no unit {name!r}" if name is not None else "--unit is needed"
        raise StreamdetectError(f"{what}: the plan's units at {split.partitions} partition(s) are {listed}")
    return chosen


def _spool(split: Plan, unit: Unit, batches: Sequence[Batch], folder: Path) -> list[_Spooled]:
    """The unit's share of each batch written to ``folder`` (Arrow IPC), in order."""
    spooled: list[_Spooled] = []
    for number, batch in enumerate(batches):
        share = split.split_batch(batch).get(unit)
        if share is None:
            continue
        inputs: list[tuple[str | None, pl.DataFrame]] = list(share.views.items())
        if share.table is not None:
            inputs.append((None, share.table))
        for view, rows in inputs:
            if rows.height:
                path = folder / f"{number}-{len(spooled)}.arrow"
                rows.write_ipc(path)
                spooled.append(_Spooled(view, path))
    return spooled


def _publication(view: str | None, op: str, rows: pl.DataFrame) -> Publication:
    return Publication(view, op, uuid.uuid4().hex, dt.datetime.now(dt.UTC), rows)  # type: ignore[arg-type]


def _fold(service: DetectorService, store: _Store, read: Publication) -> None:
    _keep(store, service.fold(read))


def _keep(store: _Store, outcome: Outcome) -> None:
    """An outcome's entries written as the worker writes them: a re-encoded state a group of chunks at a
    time, then the deletions."""
    store.apply(outcome.writes, ())
    for snapshot in outcome.snapshots:
        for group in snapshot.groups(SNAPSHOT_GROUP_BYTES):
            store.apply(group, ())
    store.apply({}, outcome.deletes)


@dataclass(frozen=True)
class _Job:
    """What a measuring process is given: the plan's arguments, the unit's name, the spool, the store."""

    topology: Topology
    partitions: int
    unit: str
    checks: tuple[str, ...]
    k: int | None
    store: str
    folder: Path
    spooled: tuple[_Spooled, ...]

    def planned(self) -> tuple[Plan, Unit]:
        split = plan(self.topology, self.partitions, self.checks, k=self.k)
        return split, _unit_of(split, self.unit)


def run_unit(
    topology: Topology,
    load: Callable[[], tuple[Mapping[str, pl.DataFrame], pl.DataFrame | None]],
    *,
    partitions: int,
    unit: str | None,
    store: str = "memory://",
    batch_rows: int = 1000,
    checks: Sequence[str] | None = None,
    k: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Fold the unit ``unit`` of the ``partitions``-partition plan of ``topology`` as a worker does, from
    the rows ``load()`` returns (the views, and the table when fed); return the measurements (module
    docstring). The rows are spooled here; the folding and the restore each run in a fresh process that
    never held them. Raises :class:`~streamdetect.errors.StreamdetectError` for an unknown unit or store."""
    if store not in STORES:
        raise StreamdetectError(f"unknown store {store!r}: a worker's table is kept in {' or '.join(STORES)}")
    if not STATM.exists():
        raise StreamdetectError(
            f"bench unit reads the process's resident memory from {STATM}, which this system lacks (Linux)"
        )
    split = plan(topology, partitions, checks, k=k)
    chosen = _unit_of(split, unit)
    folder = Path(tempfile.mkdtemp(prefix="streamdetect-unit-"))
    try:
        views, table = load()
        spooled = _spool(split, chosen, micro_batches(fed_inputs(views, table), 0, batch_rows), folder)
        del views, table
        job = _Job(topology, partitions, chosen.name, split.checks, k, store, folder, tuple(spooled))
        measured = _in_process(_fold_unit, job, progress)
        measured["phases"]["restore"] = restored = _in_process(_restore, job, None)
        measured["peak_bytes"] = max(phase["peak_bytes"] for phase in measured["phases"].values())
        measured["findings_restored"] = restored.pop("open_findings") == measured["open_findings"]
        return measured
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _in_process(
    step: Callable[[_Job, Callable[[int, int], None]], dict[str, Any]],
    job: _Job,
    progress: Callable[[int, int], None] | None,
) -> dict[str, Any]:
    """``step(job, progress)`` in a fresh process (spawned: nothing of this one's memory), its progress
    passed on; its result, or its failure raised here."""
    return_polars_freed_memory()  # the worker's setting of polars' allocator, which the process inherits
    context = multiprocessing.get_context("spawn")
    messages = context.Queue()
    process = context.Process(target=_child, args=(step, job, messages), daemon=True)
    process.start()
    try:
        while True:
            try:
                kind, *content = messages.get(timeout=1.0)
            except queue.Empty:
                if not process.is_alive():
                    raise RuntimeError(f"the measuring process ended with exit code {process.exitcode}") from None
                continue
            if kind == "progress" and progress is not None:
                progress(*content)
            elif kind == "result":
                return dict(content[0])
            elif kind == "error":
                raise RuntimeError(f"the measuring process failed: {content[0]}")
    finally:
        process.join(timeout=10)
        if process.is_alive():
            process.kill()


def _child(step: Callable[[_Job, Callable[[int, int], None]], dict[str, Any]], job: _Job, messages: Any) -> None:
    """A measuring process: the worker's malloc thresholds, then ``step``; what it gives sent back."""
    return_freed_memory()
    try:
        result = step(job, lambda done, total: messages.put(("progress", done, total)))
    except Exception as error:  # sent to the parent, which raises it
        messages.put(("error", f"{type(error).__name__}: {error}"))
        return
    messages.put(("result", result))


def _fold_unit(job: _Job, progress: Callable[[int, int], None]) -> dict[str, Any]:
    """The fold and withdraw phases (module docstring), the store left on disk for the restore."""
    split, unit = job.planned()
    phases: dict[str, Any] = {}
    baseline = resident_bytes()
    store = _Store(job.store, job.folder / "store")
    service = unit_service(split, unit)
    rows = 0
    with _phase(phases, "fold"):
        for done, item in enumerate(job.spooled, start=1):
            frame = pl.read_ipc(item.path)
            rows += frame.height
            _fold(service, store, _publication(item.view, "add", frame))
            del frame
            progress(done, len(job.spooled))
    state_bytes = service.state_bytes
    with _phase(phases, "withdraw"):
        if job.spooled:
            first = job.spooled[0]
            _fold(service, store, _publication(first.view, "retract", pl.read_ipc(first.path).head(1)))
    with _phase(phases, "snapshot"):
        _keep(store, service.compact())
    table_bytes = store.bytes()
    findings = len(service.detector.findings())
    store.persist(job.folder / "restore")
    return {
        "topology": split.topology.name,
        "partitions": split.partitions,
        "unit": unit.name,
        "store": job.store,
        "rows": rows,
        "records": len(job.spooled),
        "baseline_bytes": baseline,
        "state_bytes": state_bytes,
        "table_bytes": table_bytes,
        "open_findings": findings,
        "phases": phases,
    }


def _restore(job: _Job, progress: Callable[[int, int], None]) -> dict[str, Any]:
    """A replacement service restored from the table the fold left (:meth:`_Store.persist`) as a worker
    reads its store's (module docstring): the phase's peak and final resident bytes, seconds and the open
    findings. ``progress`` is not told: a restore is one step."""
    split, unit = job.planned()
    rocks = _open_rocksdb(job.folder / "restore")
    result: dict[str, Any] = {}
    with _phase(result, "restore"):
        entries: Mapping[str, bytes]
        if job.store == "memory://":
            entries = {key.decode(): value for key, value in rocks.items()}
        else:
            entries = LookedUp(rocks, {key.decode(): key for key in rocks.keys()})  # noqa: SIM118 -- rocksdict
        service = unit_service(split, unit)
        service.restore(entries)
    found = result["restore"]
    found["open_findings"] = len(service.detector.findings())
    rocks.close()
    return dict(found)
