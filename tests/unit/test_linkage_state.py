"""Explicit state of the linkage check: serialization, versions, raise and clear."""

from __future__ import annotations

import io

import polars as pl
import pytest

from streamdetect.checks.linkage import LinkageCheck, LinkageState
from streamdetect.model.codecs import frame_from_ipc, frame_to_ipc
from streamdetect.model.topology import ViewDefinition


def _check(k: int = 2) -> LinkageCheck:
    return LinkageCheck(
        views=(ViewDefinition("v1", ("SSN", "Job")), ViewDefinition("v2", ("Job", "Disease"))),
        identifiers=("SSN",),
        sensitive=("Disease",),
        attribute_order=("SSN", "Job", "Disease"),
        k=k,
    )


def test_a_finding_is_raised_then_cleared_when_a_second_value_arrives() -> None:
    check = _check()
    state = check.initialize()
    first = check.update(state, {"v1": pl.DataFrame({"SSN": ["1"], "Job": ["Dancer"]})})
    assert first.raised == ()
    assert first.cleared == ()
    second = check.update(state, {"v2": pl.DataFrame({"Job": ["Dancer"], "Disease": ["Flu"]})})
    assert [(f.identifier_value, f.sensitive_values, f.views) for f in second.raised] == [("1", ("Flu",), ("v1", "v2"))]
    third = check.update(state, {"v2": pl.DataFrame({"Job": ["Dancer"], "Disease": ["HD"]})})
    assert third.raised == ()
    assert [f.id for f in third.cleared] == [f.id for f in second.raised]
    # A replayed batch changes nothing.
    again = check.update(state, {"v2": pl.DataFrame({"Job": ["Dancer"], "Disease": ["HD"]})})
    assert again.raised == ()
    assert again.cleared == ()


def test_state_round_trips_through_bytes_and_refuses_other_versions() -> None:
    check = _check()
    state = check.initialize()
    check.update(
        state,
        {
            "v1": pl.DataFrame({"SSN": ["1", "2"], "Job": ["Dancer", "Clerk"]}),
            "v2": pl.DataFrame({"Job": ["Dancer"], "Disease": ["Flu"]}),
        },
    )
    restored = LinkageState.from_bytes(state.to_bytes())
    assert [f.id for f in check.result(restored)] == [f.id for f in check.result(state)]
    with pytest.raises(ValueError, match="version"):
        LinkageState.from_bytes(b'{"version": 99, "seen": {}, "linked": []}')


def test_finding_ids_are_stable_hashes_of_content() -> None:
    check = _check()
    views = {
        "v1": pl.DataFrame({"SSN": ["1"], "Job": ["Dancer"]}),
        "v2": pl.DataFrame({"Job": ["Dancer"], "Disease": ["Flu"]}),
    }
    first = check.update(check.initialize(), views).raised
    second = check.update(check.initialize(), views).raised
    assert [f.id for f in first] == [f.id for f in second]
    assert len(first[0].id) == 16


def test_unknown_view_in_a_batch_is_refused() -> None:
    with pytest.raises(KeyError):
        _check().update(LinkageState(), {"v9": pl.DataFrame({"x": [1]})})


def test_a_bulk_load_warms_what_micro_batches_read() -> None:
    check = _check()
    state = check.initialize()
    jobs = [f"job{i}" for i in range(40)]
    check.update(
        state,
        {
            "v1": pl.DataFrame({"SSN": [str(i) for i in range(40)], "Job": jobs}),
            "v2": pl.DataFrame({"Job": jobs, "Disease": ["Flu"] * 40}),
        },
    )
    # v2 arrived last: its projection for the (v1, v2) task is built by the load, not by the next batch.
    builds = state.builds
    assert builds > 0
    assert all(check._sets(state, task.key) is state.sets[task.key] for task in check.tasks)
    delta = check.update(state, {"v1": pl.DataFrame({"SSN": ["new"], "Job": ["job3"]})})
    assert state.builds == builds
    assert [f.identifier_value for f in delta.raised] == ["new"]
    # A small batch against a large state does not warm (O(state) work would not be the batch's).
    before = dict(state.projections)
    check.update(state, {"v2": pl.DataFrame({"Job": ["job5"], "Disease": ["HD"]})})
    assert state.projections.keys() == before.keys()


def test_a_replica_built_from_pieces_withdraws_rows_of_an_attribute_seen_only_null() -> None:
    # Found by the window's property test: the empty dictionary of an all-null attribute was never
    # written, and the replica's withdrawal looked it up.
    from streamdetect.detector import Detector
    from streamdetect.model.batch import Batch
    from streamdetect.model.topology import CheckConfig, TableSchema, Topology

    table = TableSchema("T", ("A", "B"), ("A",), ("B",))
    topology = Topology("t", table, (ViewDefinition("v", ("A",)),), (CheckConfig("linkage", 2),))
    original, replica = Detector(topology), Detector(topology)
    nulls = pl.DataFrame({"A": [None]}, schema={"A": pl.Int64})
    original.update(Batch({"v": nulls}))
    replica.apply_changes(original.changes())
    replica.update(Batch(retracted={"v": nulls}))
    assert replica.findings() == original.findings() == []


def test_state_pieces_are_arrow_streams_and_pieces_in_the_older_file_format_still_read() -> None:
    frame = pl.DataFrame(
        {"code": [3, 1, None], "value": ["a", "b", "c"]}, schema={"code": pl.UInt32, "value": pl.String}
    )
    piece = frame_to_ipc(frame)
    assert pl.read_ipc_stream(io.BytesIO(piece)).equals(frame)  # the stream format
    older = io.BytesIO()
    frame.write_ipc(older)  # what pieces were before
    for data in (piece, older.getvalue()):
        restored = frame_from_ipc(data)
        assert restored.schema == frame.schema
        assert restored.equals(frame)
    empty = pl.DataFrame(schema={"day": pl.Date})
    assert frame_from_ipc(frame_to_ipc(empty)).schema == empty.schema


def test_a_state_whose_pieces_were_written_as_arrow_files_restores_the_same() -> None:
    check = _check()
    state = check.initialize()
    check.update(state, {"v1": pl.DataFrame({"SSN": ["1", "2"], "Job": ["Dancer", "Cook"]})})
    check.update(state, {"v2": pl.DataFrame({"Job": ["Dancer", "Cook"], "Disease": ["Flu", "HD"]})})
    pieces = state.take_changes()

    def as_file(data: bytes) -> bytes:
        buffer = io.BytesIO()
        frame_from_ipc(data).write_ipc(buffer)
        return buffer.getvalue()

    fresh, older = check.initialize(), check.initialize()
    fresh.apply_changes(pieces)
    older.apply_changes({key: as_file(data) for key, data in pieces.items()})
    assert [f.id for f in check.result(older)] == [f.id for f in check.result(fresh)] != []


def test_a_join_plan_is_recorded_anew_once_the_other_relations_grew() -> None:
    """A plan is kept per size class of the delta *and* of the other relations: an order recorded while
    the views were small is not replayed once they have grown (it joined whole views first)."""
    check = _check()
    state = check.initialize()
    key = check.tasks[0].key
    small = [pl.DataFrame({"Job": ["a"] * 10})]
    grown = [pl.DataFrame({"Job": ["a"] * 1000})]
    first = LinkageCheck._plan(state, key, "v1", 3, small)
    first.order.append("Job")
    assert LinkageCheck._plan(state, key, "v1", 3, small) is first
    # A neighbouring delta size with the same other relations starts from the recorded order.
    assert LinkageCheck._plan(state, key, "v1", 4, small).order == ["Job"]
    # Other relations four times larger or more: recorded anew.
    assert LinkageCheck._plan(state, key, "v1", 3, grown).order == []


@pytest.mark.parametrize("large_rows", [100_000, 1], ids=["numpy", "polars"])
def test_seen_rows_match_rows_with_nulls_as_equal(monkeypatch: pytest.MonkeyPatch, large_rows: int) -> None:
    from streamdetect.checks.seen_rows import SeenRows
    from streamdetect.relational import small_joins

    # Stored rows from ``large_rows`` on are located by polars' joins, below in numpy: both alike.
    monkeypatch.setattr(small_joins, "LARGE_ROWS", large_rows)

    seen = SeenRows()
    first = pl.DataFrame({"A": ["x", None, "y"], "B": [None, None, "z"]})
    new, positions = seen.add("v", first, ["A", "B"])
    assert new.height == 3
    assert positions.to_list() == [0, 1, 2]
    # The same rows again, one of them twice, and one new with a null: only the new one is new.
    again = pl.DataFrame({"A": [None, "x", None, "y", "w"], "B": [None, None, None, "z", None]})
    new, positions = seen.add("v", again, ["A", "B"])
    assert positions.to_list() == [3]
    assert seen.height("v") == 4
    # Withdrawing every occurrence of (null, null) (three) takes that row away; one of (x, null) leaves it.
    _gone, positions = seen.retract("v", pl.DataFrame({"A": [None, None, None, "x"], "B": [None] * 4}), ["A", "B"])
    assert positions.to_list() == [1]
    assert seen.height("v") == 3
