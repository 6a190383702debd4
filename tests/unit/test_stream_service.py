"""The worker's per-record service without Kafka: replays, refusals, restore from the table it writes."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import streamdetect
from streamdetect.checks.canonical import stable_id
from streamdetect.errors import StateError
from streamdetect.io.sources import load_views
from streamdetect.model import codecs
from streamdetect.stream.events import finding_event, finding_events, open_findings
from streamdetect.stream.records import Publication, encode_publication
from streamdetect.stream.service import DetectorService, Outcome, merged_batch, runs
from streamdetect.stream.state_log import (
    CHAIN_LINKS,
    DETECTOR_KEY,
    EXTENDS_KEY,
    FINGERPRINT_KEY,
    PIECE_PREFIX,
    SNAPSHOT_PREFIX,
    Chunks,
    chunked,
    latest_chain,
    pack_entries,
    read_entries,
    unpack_entries,
)

ROOT = Path(__file__).resolve().parents[2]
WHEN = dt.datetime(2026, 11, 26, tzinfo=dt.UTC)


def _record(view: str, rows: pl.DataFrame, batch: str, op: str = "add") -> tuple[bytes, list[tuple[str, bytes]]]:
    return encode_publication(Publication(view, op, batch, WHEN, rows))  # type: ignore[arg-type]


def test_records_one_by_one_give_the_findings_of_check_and_a_table_that_restores_them() -> None:
    topology = streamdetect.load_topology(ROOT / "topologies" / "dou-patients.yaml")
    views = load_views(topology)
    service = DetectorService(topology)
    service.restore({})
    table: dict[str, bytes] = {}
    events: list[bytes] = []
    for name, frame in views.items():
        for position in range(frame.height):
            outcome = service.handle(*_record(name, frame.slice(position, 1), f"{name}-{position}"), None)
            assert outcome.dead is None
            table.update(outcome.written())
            events += [value for _, value in outcome.events]
    expected = {f.id for f in streamdetect.check(topology).findings}
    assert set(open_findings(events)) == expected
    assert len(table) == sum(frame.height for frame in views.values())  # one entry per record

    # A replacement rebuilt from the table skips what was folded in and goes on from there.
    again = DetectorService(topology)
    again.restore(table)
    assert {f.id for f in again.detector.findings()} == expected
    # The findings open in the restored state, for the worker's gauge: given once, not kept after.
    assert {f.id for f in again.take_restored_open()} == expected
    assert again.take_restored_open() == []
    replay = again.handle(*_record("v2", views["v2"].head(1), "v2-0"), None)
    assert replay.replayed
    assert replay.written() == {}
    dan = views["v2"].filter(pl.col("Name") == "Dan")
    withdrawn = again.handle(*_record("v2", dan, "withdraw-dan", op="retract"), None)
    assert open_findings([value for _, value in withdrawn.events]) == {}  # the withdrawal only clears
    assert len(open_findings(events + [value for _, value in withdrawn.events])) == len(expected) - 1


def test_a_batch_the_detector_refuses_is_a_dead_letter_and_changes_nothing() -> None:
    topology = streamdetect.load_topology(ROOT / "topologies" / "dou-patients.yaml")
    views = load_views(topology)
    service = DetectorService(topology)
    service.restore({})
    outcome = service.handle(*_record("v1", views["v1"].head(1), "w", op="retract"), None)
    assert outcome.dead is not None
    assert outcome.dead.reason == "refused"
    assert "387" not in outcome.dead.detail
    assert outcome.written() == {}
    assert service.detector.findings() == []


def test_an_undeclared_attribute_of_another_type_than_before_is_a_wrong_type_dead_letter() -> None:
    topology = streamdetect.load_topology(ROOT / "topologies" / "dou-patients.yaml")  # no attribute typed
    views = load_views(topology)
    service = DetectorService(topology)
    service.restore({})
    assert service.handle(*_record("v1", views["v1"].head(1), "text"), None).dead is None
    numbers = views["v1"].slice(1, 1).with_columns(pl.lit(7).alias("DOB"))  # read as Int64: DOB was text
    outcome = service.handle(*_record("v1", numbers, "number"), None)
    assert outcome.dead is not None
    assert (outcome.dead.reason, outcome.dead.detail) == (
        "wrong_type",
        "an attribute's type differs from earlier batches",
    )
    assert outcome.written() == {}


def test_a_table_written_under_another_threshold_is_refused() -> None:
    topology = streamdetect.load_topology(ROOT / "topologies" / "dou-patients.yaml")
    service = DetectorService(topology, None)
    with pytest.raises(StateError, match="another topology"):
        service.restore({"record/000000000000": pack_entries({FINGERPRINT_KEY: b"not this one"})})


def test_open_findings_fold_raised_and_cleared_events_in_order() -> None:
    def event(kind: str, finding_id: str) -> bytes:
        return f'{{"event": "{kind}", "id": "{finding_id}", "finding": {{"id": "{finding_id}"}}}}'.encode()

    folded = open_findings([event("raised", "a"), event("raised", "b"), event("raised", "a"), event("cleared", "b")])
    assert list(folded) == ["a"]


def _table1_records(views: dict[str, pl.DataFrame]) -> list[tuple[bytes, list[tuple[str, bytes]], None]]:
    """Table 1 row by row, a replay, Dan's withdrawal and return, and one unreadable record."""
    items = [
        (*_record(name, frame.slice(position, 1), f"{name}-{position}"), None)
        for name, frame in views.items()
        for position in range(frame.height)
    ]
    dan = views["v2"].filter(pl.col("Name") == "Dan")
    items.insert(3, (*_record("v1", views["v1"].head(1), "v1-0"), None))  # a replay within the stream
    items += [(*_record("v2", dan, "withdraw-dan", op="retract"), None)]
    items += [(b"not arrow", _record("v2", dan, "poison")[1], None)]
    items += [(*_record("v2", dan, "dan-back"), None)]
    items += [(*_record("v2", dan, "withdraw-twice", op="retract"), None)]
    items += [(*_record("v2", dan, "withdraw-again", op="retract"), None)]  # not published any more
    return items


@pytest.mark.parametrize("group", [1, 2, 3, 5, 50])
def test_records_taken_together_end_where_one_by_one_ends(group: int) -> None:
    topology = streamdetect.load_topology(ROOT / "topologies" / "dou-patients.yaml")
    views = load_views(topology)
    items = _table1_records(views)
    one = DetectorService(topology)
    one.restore({})
    alone = [one.handle(*item) for item in items]
    many = DetectorService(topology)
    many.restore({})
    taken = [outcome for at in range(0, len(items), group) for outcome in many.handle_many(items[at : at + group])]
    assert [f.id for f in many.detector.findings()] == [f.id for f in one.detector.findings()]
    events = [value for outcome in taken for _, value in outcome.events]
    assert set(open_findings(events)) == {f.id for f in one.detector.findings()}
    # The same records are dead letters, with the same reasons, and the same are replays.
    assert [o.dead.reason if o.dead else None for o in taken] == [o.dead.reason if o.dead else None for o in alone]
    assert [o.replayed for o in taken] == [o.replayed for o in alone]
    if group > 1:
        assert any(o.merged for o in taken)
    # A replacement restored from what the grouped service wrote skips every batch it folded in.
    table = {key: value for outcome in taken for key, value in outcome.written().items()}
    again = DetectorService(topology)
    again.restore(table)
    assert [f.id for f in again.detector.findings()] == [f.id for f in one.detector.findings()]
    assert all(o.replayed or o.dead for o in again.handle_many(items))


def test_a_run_attributes_its_findings_to_its_last_record_and_lists_them_all() -> None:
    topology = streamdetect.load_topology(ROOT / "topologies" / "dou-patients.yaml")
    views = load_views(topology)
    service = DetectorService(topology)
    service.restore({})
    outcomes = service.handle_many(
        [(*_record("v1", views["v1"], "b1"), None), (*_record("v2", views["v2"], "b2"), None)]
    )
    assert outcomes[0].merged
    assert outcomes[0].events == []
    assert outcomes[0].written() == {}
    bodies = [json.loads(value) for _, value in outcomes[1].events]
    assert {(body["batch"], tuple(body["batches"])) for body in bodies} == {("b2", ("b1", "b2"))}
    assert len(outcomes[1].written()) == 1  # one state entry for the run


def test_runs_break_only_where_a_time_window_needs_one_publication_time() -> None:
    rows = pl.DataFrame({"A": [1]})
    later = WHEN + dt.timedelta(seconds=1)
    reads = [
        Publication("v1", "add", "a", WHEN, rows),
        Publication("v2", "retract", "b", WHEN, rows),
        Publication("v2", "add", "c", WHEN, rows),
        Publication("v1", "retract", "d", WHEN, rows),  # netted against the run's addition to v1
        Publication("v1", "add", "e", later, rows),
    ]
    assert [[r.batch_id for r in run] for run in runs(reads)] == [["a", "b", "c", "d", "e"]]
    assert [[r.batch_id for r in run] for run in runs(reads, windowed=True)] == [["a", "b", "c", "d"], ["e"]]


def test_a_run_nets_a_withdrawal_against_the_rows_it_added_before_it() -> None:
    one, two, three = (pl.DataFrame({"A": [value]}) for value in (1, 2, 3))
    reads = [
        Publication("v1", "retract", "a", WHEN, one),  # published before the run
        Publication("v1", "add", "b", WHEN, pl.concat([two, two, three])),
        Publication("v1", "retract", "c", WHEN, pl.concat([two, one])),  # one of the 2s; 1 again: before
        Publication("v2", "add", "d", WHEN, one),
    ]
    batch = merged_batch(reads)
    assert sorted(batch.retracted["v1"].get_column("A").to_list()) == [1, 1]
    assert sorted(batch.views["v1"].get_column("A").to_list()) == [2, 3]
    assert batch.views["v2"].get_column("A").to_list() == [1]


def test_an_entry_bigger_than_a_record_is_written_in_chunks_and_restored_only_whole() -> None:
    topology = streamdetect.load_topology(ROOT / "topologies" / "dou-patients.yaml")
    views = load_views(topology)
    items = [(*_record(name, frame, f"{name}-all"), None) for name, frame in views.items()]
    service = DetectorService(topology, max_bytes=4096)
    service.restore({})
    outcomes = service.handle_many(items)
    table = {key: value for outcome in outcomes for key, value in outcome.written().items()}
    assert len(table) > 1
    assert all(len(value) <= 4096 for value in table.values())
    again = DetectorService(topology, max_bytes=4096)
    again.restore(table)
    assert [f.id for f in again.detector.findings()] == [f.id for f in service.detector.findings()]
    # A worker killed between chunks: the entry is left out, and its records are folded again.
    partial = dict(table)
    del partial[sorted(partial)[-1]]
    broken = DetectorService(topology, max_bytes=4096)
    broken.restore(partial)
    assert broken.detector.findings() == []
    refolded = broken.handle_many(items)
    assert not any(o.replayed for o in refolded)
    assert [f.id for f in broken.detector.findings()] == [f.id for f in service.detector.findings()]
    assert not set(refolded[-1].written()) & set(table)  # a new entry number: no chunk of the old one reused


def _stored(table: dict[str, bytes], outcome: Outcome) -> None:
    """What the worker does with an outcome's entries: write them, then delete what a snapshot replaced."""
    table.update(outcome.written())
    for key in outcome.deletes:
        del table[key]


@pytest.mark.parametrize("compact_bytes", [1, 3000])
def test_a_compacted_table_restores_the_state_after_every_record(compact_bytes: int) -> None:
    topology = streamdetect.load_topology(ROOT / "topologies" / "dou-patients.yaml")
    views = load_views(topology)
    items = _table1_records(views)
    reference = DetectorService(topology, compact_bytes=None)
    reference.restore({})
    service = DetectorService(topology, compact_bytes=compact_bytes)
    service.restore({})
    table: dict[str, bytes] = {}
    snapshots = 0
    for item in items:
        expected = reference.handle(*item)
        outcome = service.handle(*item)
        assert [value for _, value in outcome.events] == [value for _, value in expected.events]
        _stored(table, outcome)
        if any(key.startswith(SNAPSHOT_PREFIX) for key in outcome.written()):
            snapshots += 1
            # A snapshot replaces every record written before it (a link holds their pieces).
            assert not any(key.startswith("record/") for key in table), sorted(table)
        # A replacement restored from the table has the same state and goes on from there.
        again = DetectorService(topology, compact_bytes=compact_bytes)
        again.restore(table)
        assert [f.id for f in again.detector.findings()] == [f.id for f in reference.detector.findings()]
        assert set(again.applied) == set(reference.applied)
        assert again.applied == service.applied  # with when each was folded
        refolded = again.handle(*item)  # once: a second call would be a replay whatever the first did
        assert refolded.replayed or refolded.dead is not None
        assert not set(again.log_keys) ^ set(table)
        service = again
    assert snapshots > 1


def test_a_long_stream_keeps_a_compacted_table_bounded() -> None:
    topology = streamdetect.load_topology(ROOT / "topologies" / "dou-patients.yaml")
    views = load_views(topology)
    service = DetectorService(topology, compact_bytes=1)
    service.restore({})
    table: dict[str, bytes] = {}
    sizes = []
    # The same rows again and again (views are bags: each record adds to their counts, a piece each).
    for number in range(300):
        name = "v1" if number % 2 else "v2"
        _stored(table, service.handle(*_record(name, views[name].slice(number % 6, 1), f"b{number}"), None))
        sizes.append(sum(len(value) for value in table.values()))
    assert len(table) < 100  # 300 entries without compaction
    # Bytes stay within about twice the state (the last snapshot) plus a record: no growth with time.
    assert max(sizes[150:]) < 2.5 * service.snapshot_bytes
    again = DetectorService(topology)
    again.restore(table)
    assert [f.id for f in again.detector.findings()] == [f.id for f in service.detector.findings()]


def _pieces(entry: dict[str, bytes]) -> set[str]:
    """The Detector's pieces among a record's entries."""
    return {key for key in entry if not key.startswith(("meta/", "applied/"))}


def test_snapshots_without_withdrawals_link_the_pieces_since_and_a_full_chain_is_reencoded() -> None:
    topology = streamdetect.load_topology(ROOT / "topologies" / "dou-patients.yaml")
    views = load_views(topology)
    service = DetectorService(topology, compact_bytes=1)
    service.restore({})
    table: dict[str, bytes] = {}
    chain: list[int] = []
    links = reencoded = 0
    for number in range(200):
        name = "v1" if number % 2 else "v2"
        outcome = service.handle(*_record(name, views[name].slice(number % 6, 1), f"b{number}"), None)
        # A snapshot, link or not, is cut as written: its chunks are not among the record's writes.
        assert not any(key.startswith(SNAPSHOT_PREFIX) for key in outcome.writes)
        written = [key for key in outcome.written() if key.startswith(SNAPSHOT_PREFIX)]
        if written:
            (key,) = written
            entry = read_entries(outcome.written()[key])
            chain_keys = {SNAPSHOT_PREFIX + f"{link:012d}" for link in chain}
            now = {**table, **outcome.written()}  # the fold's own record among those it replaces
            records = [unpack_entries(now[old]) for old in outcome.deletes if not old.startswith(SNAPSHOT_PREFIX)]
            if DETECTOR_KEY in entry:  # a full chain re-encoded: it replaces the chain too
                assert len(chain) == CHAIN_LINKS
                assert EXTENDS_KEY not in entry
                assert not any(name.startswith(PIECE_PREFIX) for name in entry)
                assert chain_keys <= set(outcome.deletes)
                chain, reencoded = [], reencoded + 1
            else:  # a link: the pieces of the records it replaces, none of the state before them
                assert entry.get(EXTENDS_KEY) == (str(chain[-1]).encode() if chain else None)
                linked = {name[len(PIECE_PREFIX) :] for name in entry if name.startswith(PIECE_PREFIX)}
                assert linked == set().union(*map(_pieces, records))
                assert not chain_keys & set(outcome.deletes)
                links += 1
            chain.append(int(key[len(SNAPSHOT_PREFIX) :]))
            assert service.pieces == {}  # what the service keeps: the pieces since the last link
        _stored(table, outcome)
        assert service.pieces is not None
        assert set(service.pieces) == set().union(*(_pieces(unpack_entries(table[old])) for old in service.record_keys))
    assert reencoded
    assert links > CHAIN_LINKS
    again = DetectorService(topology)
    again.restore(table)
    assert [f.id for f in again.detector.findings()] == [f.id for f in service.detector.findings()]
    assert again.links == len(chain)
    assert set(again.log_keys) == set(table)


def _fed(
    topology: Any, items: list[tuple[bytes, list[tuple[str, bytes]], None]]
) -> tuple[DetectorService, dict[str, bytes]]:
    """A service (records of 2,048 bytes at most, no compaction) fed ``items``, and its table; it compacts
    at its next record."""
    service = DetectorService(topology, max_bytes=2048, compact_bytes=None)
    service.restore({})
    table: dict[str, bytes] = {}
    for item in items:
        _stored(table, service.handle(*item))
    service.compact_bytes = 1
    return service, table


def test_a_snapshot_written_as_a_packed_frame_before_still_restores() -> None:
    topology = streamdetect.load_topology(ROOT / "topologies" / "dou-patients.yaml")
    views = load_views(topology)
    items = _table1_records(views)
    service, table = _fed(topology, items)
    last = service.handle(*_record("v1", views["v1"].head(1), "one-more"), None)
    _stored(table, last)
    written = {key: value for key, value in last.written().items() if key.startswith(SNAPSHOT_PREFIX)}
    assert len(written) > 1  # in chunks
    whole = b"".join(written[key] for key in sorted(written))
    entries = read_entries(whole)
    assert DETECTOR_KEY in entries  # withdrawals among the records: the Detector re-encoded
    # The same snapshot as the worker wrote it before: its entries packed in a frame, in chunks.
    (number,) = {key.partition(".")[0] for key in written}
    before = {key: value for key, value in table.items() if key not in written}
    before |= chunked(number, pack_entries({key: bytes(value) for key, value in entries.items()}), 2048)
    again = DetectorService(topology, max_bytes=2048)
    again.restore(before)
    assert [f.id for f in again.detector.findings()] == [f.id for f in service.detector.findings()]
    assert again.handle(*items[0]).replayed


def test_the_latest_snapshot_whose_chain_is_whole_is_restored() -> None:
    root = pack_entries({DETECTOR_KEY: b"root"})
    link = {number: pack_entries({EXTENDS_KEY: str(number).encode()}) for number in (1, 3, 4, 9)}
    # 5 extends 3, which extends 1: whole. 7 extends 4, which is gone; 8 names itself.
    found = latest_chain({1: root, 3: link[1], 5: link[3], 7: link[4], 8: pack_entries({EXTENDS_KEY: b"8"})})
    assert [number for number, _ in found] == [1, 3, 5]
    assert latest_chain({3: link[1]}) == []
    assert latest_chain({}) == []


def test_deferred_snapshots_are_forced_at_twice_the_threshold_and_taken_when_idle() -> None:
    topology = streamdetect.load_topology(ROOT / "topologies" / "dou-patients.yaml")
    views = load_views(topology)
    items = _table1_records(views)
    reference = DetectorService(topology, compact_bytes=None)
    reference.restore({})
    service = DetectorService(topology, compact_bytes=2000, defer_compaction=True)
    service.restore({})
    table: dict[str, bytes] = {}
    forced = idle = 0
    for number, item in enumerate(items):
        reference.handle(*item)
        outcome = service.handle(*item)
        threshold = service.snapshot_threshold
        assert threshold is not None
        if any(key.startswith(SNAPSHOT_PREFIX) for key in outcome.written()):
            forced += 1
            assert service.since_snapshot == 0
        else:  # a fold leaves up to twice the threshold unsnapshotted, where an inline one would have taken it
            assert service.since_snapshot < 2 * threshold
        _stored(table, outcome)
        if number % 3 == 2 and service.idle_compaction_due():  # the worker's timer, now and then
            assert service.since_snapshot >= threshold / 2
            snapshot = service.compact()
            assert not snapshot.events
            assert snapshot.publication is None
            assert snapshot.deletes
            assert all(key.startswith(SNAPSHOT_PREFIX) for key in snapshot.written())
            _stored(table, snapshot)
            idle += 1
            assert not service.idle_compaction_due()  # nothing written since
        # Whichever took the last snapshot, a replacement restored from the table has the same state.
        again = DetectorService(topology, compact_bytes=2000, defer_compaction=True)
        again.restore(table)
        assert [f.id for f in again.detector.findings()] == [f.id for f in reference.detector.findings()]
        assert set(again.applied) == set(reference.applied)
        assert not set(again.log_keys) ^ set(table)
        service = again
    assert forced
    assert idle


def test_a_snapshot_cut_short_or_left_beside_what_it_replaces_restores_the_same_state() -> None:
    topology = streamdetect.load_topology(ROOT / "topologies" / "dou-patients.yaml")
    views = load_views(topology)
    items = _table1_records(views)
    service, table = _fed(topology, items[:-3])
    last = service.handle(*items[-3])
    chunks = sorted(key for key in last.written() if key.startswith(SNAPSHOT_PREFIX))
    assert len(chunks) > 1
    assert last.deletes
    expected = [f.id for f in service.detector.findings()]

    # Killed after the snapshot was written, before its deletions: the records it covers are ignored.
    beside = {**table, **last.written()}
    restored = DetectorService(topology, max_bytes=2048)
    restored.restore(beside)
    assert [f.id for f in restored.detector.findings()] == expected
    assert restored.handle(*items[0]).replayed
    # Killed between the snapshot's chunks: the state is the records', the last one's included.
    cut = {key: value for key, value in beside.items() if key != chunks[-1]}
    partial = DetectorService(topology, max_bytes=2048)
    partial.restore(cut)
    assert [f.id for f in partial.detector.findings()] == expected
    # Its next entries take new numbers and its next snapshot deletes the stale chunks.
    partial.compact_bytes = 1
    after = partial.handle(*items[-2])
    assert not set(after.written()) & set(cut)
    assert set(after.deletes) == set(cut) | {key for key in after.written() if not key.startswith(SNAPSHOT_PREFIX)}


def test_a_snapshot_forgets_batch_ids_folded_before_the_replay_retention() -> None:
    topology = streamdetect.load_topology(ROOT / "topologies" / "dou-patients.yaml")
    views = load_views(topology)
    items = [(*_record(name, frame, f"{name}-all"), None) for name, frame in views.items()]
    kept = DetectorService(topology, compact_bytes=1)
    kept.restore({})
    forgetful = DetectorService(topology, compact_bytes=1, replay_retention_s=0.0)
    forgetful.restore({})
    tables: list[dict[str, bytes]] = [{}, {}]
    for service, table in zip((kept, forgetful), tables, strict=True):
        for item in items:
            _stored(table, service.handle(*item))
            service.compact_bytes = None  # a snapshot at the first record only
    assert set(kept.applied) == {"v1-all", "v2-all"}
    assert set(forgetful.applied) == {"v2-all"}  # forgotten by the snapshot its own record took
    again = DetectorService(topology, replay_retention_s=0.0)
    again.restore(tables[1])
    assert [f.id for f in again.detector.findings()] == [f.id for f in kept.detector.findings()]
    assert again.handle(*items[1]).replayed  # folded after the last snapshot: still known
    assert not again.handle(*items[0]).replayed  # redelivered past the retention: folded again
    restored = DetectorService(topology)
    restored.restore(tables[0])
    assert all(restored.handle(*item).replayed for item in items)


def test_a_snapshot_after_withdrawals_reencodes_the_state_and_without_them_merges_the_pieces() -> None:
    topology = streamdetect.load_topology(ROOT / "topologies" / "dou-patients.yaml")
    views = load_views(topology)
    items = _table1_records(views)  # withdrawals of Dan's row among them
    # A row published twice and withdrawn once changes a count only (no pair dropped): still a history.
    twice = [
        (*_record("v1", views["v1"].head(1), "again"), None),
        (*_record("v1", views["v1"].head(1), "less", op="retract"), None),
    ]
    for stream, reencoded in ((items[:9], False), (items, True), (items[:9] + twice, True)):
        service = DetectorService(topology, compact_bytes=None)
        service.restore({})
        table: dict[str, bytes] = {}
        for item in stream:
            _stored(table, service.handle(*item))
        service.compact_bytes = 1
        last = service.handle(*_record("v1", views["v1"].head(1), "one-more"), None)
        _stored(table, last)
        (snapshot,) = [read_entries(value) for key, value in last.written().items() if key.startswith(SNAPSHOT_PREFIX)]
        assert (DETECTOR_KEY in snapshot) is reencoded
        assert any(key.startswith(PIECE_PREFIX) for key in snapshot) is not reencoded
        again = DetectorService(topology)
        again.restore(table)
        assert [f.id for f in again.detector.findings()] == [f.id for f in service.detector.findings()]


@pytest.mark.parametrize("size", [0, 1, 999, 1000, 1001, 5000])
def test_a_large_entry_cut_as_it_is_written_gives_the_chunks_of_one_cut_whole(size: int) -> None:
    """A snapshot's chunks cut group by group from its parts (a worker sends and keeps each group before the
    next is cut) are the chunks of the entry cut whole, under the keys and size told before any is cut; the
    parts are let go as they are cut, and the chunks are taken once."""
    data = bytes(range(256)) * (size // 256 + 1)
    parts: list[bytes | memoryview] = [
        data[: size // 3],
        memoryview(data)[size // 3 : size // 2],
        data[size // 2 : size],
    ]
    whole = chunked("snapshot/7", data[:size], 2048)
    chunks = Chunks("snapshot/7", parts, 2048)
    assert chunks.keys == list(whole)
    assert chunks.size == size
    groups = list(chunks.groups(2500))
    assert {name: chunk for group in groups for name, chunk in group.items()} == whole
    assert [list(group) for group in groups] == [list(whole)[i : i + 3] for i in range(0, len(whole), 3)]
    assert not parts  # every part let go
    with pytest.raises(RuntimeError, match="taken already"):
        list(chunks.groups(2500))


@pytest.mark.parametrize("defer_bytes", [codecs.DEFER_BYTES, 0])
def test_a_reencoded_snapshot_is_written_after_the_records_entries_and_cut_when_taken(
    defer_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A withdrawal makes the next snapshot re-encode the state: it leaves the fold as chunks still to cut
    (``snapshots``), not among ``writes``, and the table it makes restores the state; with every frame
    deferred (made again as its chunks are cut) too."""
    monkeypatch.setattr(codecs, "DEFER_BYTES", defer_bytes)
    topology = streamdetect.load_topology(ROOT / "topologies" / "dou-patients.yaml")
    views = load_views(topology)
    service = DetectorService(topology, compact_bytes=None, max_bytes=4096)
    service.restore({})
    table: dict[str, bytes] = {}
    for item in _table1_records(views):
        _stored(table, service.handle(*item))
    service.compact_bytes = 1
    last = service.handle(*_record("v1", views["v1"].head(1), "one-more"), None)
    assert not any(key.startswith(SNAPSHOT_PREFIX) for key in last.writes)
    (snapshot,) = last.snapshots
    assert len(snapshot.keys) > 1  # cut in chunks under max_bytes
    assert last.written_bytes == sum(len(piece) for piece in last.writes.values()) + snapshot.size
    for group in snapshot.groups(1):
        table |= group
    for key in last.deletes:
        table.pop(key, None)
    table |= last.writes
    again = DetectorService(topology)
    again.restore(table)
    assert [f.id for f in again.detector.findings()] == [f.id for f in service.detector.findings()]


@pytest.mark.parametrize(
    "example", ["dou-patients.yaml", "yao-figure1.yaml", "sind-figure4.yaml", "yao-serious-possible.yaml"]
)
def test_a_finding_event_carries_the_findings_json_form_spliced_in_as_its_id_hashed_it(example: str) -> None:
    findings = streamdetect.check(streamdetect.load_topology(ROOT / "topologies" / example)).findings
    assert findings
    publication = Publication("v1", "add", "b-1", WHEN, pl.DataFrame())
    for finding in findings:
        form = finding.json_form
        assert json.loads(finding.json_text) == form
        assert finding.id == stable_id({key: value for key, value in form.items() if key != "id"})
        for batches in (None, ["b-0", "b-1"]):
            key, value = finding_event(finding, "raised", publication, batches)
            expected = {
                "event": "raised",
                "id": finding.id,
                "check": finding.check,
                "published": WHEN.isoformat(),
                "batch": "b-1",
                "view": "v1",
                "finding": form,
            } | ({"batches": batches} if batches else {})
            assert key == finding.id.encode()
            assert json.loads(value) == expected
    # Several findings (of several checks) at once: the same records.
    for batches in (None, ["b-0", "b-1"]):
        events = finding_events(findings, "cleared", publication, batches)
        assert events == [finding_event(finding, "cleared", publication, batches) for finding in findings]


def test_a_worker_killed_between_its_state_and_its_events_has_them_sent_by_whoever_restores_it() -> None:
    """The state goes to the table before the events to the findings topic. A worker killed in between
    leaves a state whose last fold's events never went: whoever restores it sends them again (raised
    findings still open, cleared ones not), so the topic's open findings are the state's. (Events first
    left a finding open for good: the replacement took the records in another run, in which that finding
    was raised and cleared again without an event.)"""
    topology = streamdetect.load_topology(ROOT / "topologies" / "dou-patients.yaml")
    views = load_views(topology)
    dan = views["v2"].filter(pl.col("Name") == "Dan")
    others = views["v2"].filter(pl.col("Name") != "Dan")
    table: dict[str, bytes] = {}
    events: list[bytes | None] = []

    def delivered(outcomes: list[Outcome], *, events_sent: bool = True) -> None:
        for outcome in outcomes:
            table.update(outcome.written())
            events.extend(value for _, value in outcome.events if events_sent)

    first = DetectorService(topology)
    first.restore({})
    delivered(first.handle_many([(*_record("v1", views["v1"], "v1"), None), (*_record("v2", others, "v2"), None)]))
    before = set(open_findings(events))
    # Dan's row raises his finding; the worker writes the state and is killed before sending the events.
    [raised] = first.handle_many([(*_record("v2", dan, "dan"), None)])
    assert raised.raised
    delivered([raised], events_sent=False)
    assert set(open_findings(events)) == before

    second = DetectorService(topology)
    second.restore(table)
    resent = second.take_resent()
    assert second.take_resent() == []  # once
    events.extend(value for _, value in resent)
    assert set(open_findings(events)) == {finding.id for finding in second.detector.findings()}
    # The record comes again (a replay) with the withdrawal, in one run: the withdrawal clears the finding.
    outcomes = second.handle_many(
        [(*_record("v2", dan, "dan"), None), (*_record("v2", dan, "dan-withdrawn", "retract"), None)]
    )
    assert outcomes[0].replayed
    # Killed again between the state and the events of the withdrawal: its cleared event is sent again.
    delivered(outcomes, events_sent=False)
    third = DetectorService(topology)
    third.restore(table)
    events.extend(value for _, value in third.take_resent())
    assert set(open_findings(events)) == before == {finding.id for finding in third.detector.findings()}
