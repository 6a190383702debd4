"""The table's changes, translated run by run into withdrawals and additions of the table and of each view,
leave every view holding what its definition computes from the table's final rows; a run sent again
(Debezium after a restart) changes nothing; a withdrawal never names a row the topic does not hold.

Reference: the table kept as a bag by applying the changes one by one, and each view computed from it
(``ViewDefinition.rows_from``, the definition) at the end. Strategies draw empty tables, selections no row
satisfies, deletes that empty a view, updates that touch nothing a view projects, nulls, repeated rows.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamdetect.model.predicates import parse_predicate
from streamdetect.model.topology import TableSchema, Topology, ViewDefinition
from streamdetect.stream.changes import ChangeError, ChangeTranslator, Progress, read_change

ATTRIBUTES = ("Name", "Age", "Job", "Born")
COLUMNS = {"Name": "name", "Age": "age", "Job": "job", "Born": "born"}
DTYPES = {"Name": pl.String(), "Age": pl.Int64(), "Job": pl.String(), "Born": pl.Date()}
WHERES = [None, "Age > 1", "Job IN ('a') OR Age < 0", "Age > 100", "NOT Job = 'b'", "Born >= '1970-01-03'"]
EPOCH = dt.date(1970, 1, 1)

rows = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["n1", "n2", "n3"]),
        "age": st.one_of(st.none(), st.integers(-1, 3)),
        "job": st.one_of(st.none(), st.sampled_from(["a", "b"])),
        "born": st.one_of(st.none(), st.integers(0, 4)),  # Debezium's day numbers
    }
)


@st.composite
def views(draw: st.DrawFn) -> tuple[ViewDefinition, ...]:
    drawn = []
    for i in range(draw(st.integers(1, 3))):
        attributes = draw(st.lists(st.sampled_from(ATTRIBUTES), min_size=1, max_size=3, unique=True))
        where = draw(st.sampled_from(WHERES))
        drawn.append(ViewDefinition(f"v{i}", tuple(attributes), parse_predicate(where) if where else None, where))
    return tuple(drawn)


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]]]:
    """A snapshot's rows and the changes after it, as Debezium's events (before, after), in runs."""
    snapshot = draw(st.lists(rows, max_size=5))
    table = list(snapshot)
    changes: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["c", "u", "d"]) if table else st.just("c"))
        if kind == "c":
            after = draw(rows)
            table.append(after)
            changes.append({"op": "c", "before": None, "after": after})
        else:
            position = draw(st.integers(0, len(table) - 1))
            before = table[position]
            if kind == "d":
                del table[position]
                changes.append({"op": "d", "before": before, "after": None})
            else:
                after = {**before, **draw(st.dictionaries(st.sampled_from(list(COLUMNS.values())), st.none()))}
                if draw(st.booleans()):
                    after = draw(rows)
                table[position] = after
                changes.append({"op": "u", "before": before, "after": after})
    cuts = sorted(draw(st.lists(st.integers(0, len(changes)), max_size=4)))
    runs = [changes[a:b] for a, b in zip([0, *cuts], [*cuts, len(changes)], strict=True)]
    return snapshot, runs


def _event(change: dict[str, Any], position: int, snapshot: str = "false") -> bytes:
    sequence = json.dumps([None, str(100)]) if snapshot != "false" else json.dumps([str(position), str(position)])
    source = {"snapshot": snapshot, "lsn": 100, "sequence": sequence, "ts_ms": 1_000 + position}
    return json.dumps({**change, "source": source}).encode()


def _bag(frame: pl.DataFrame) -> Counter[tuple[Any, ...]]:
    return Counter(frame.rows())


def _typed(images: list[dict[str, Any]]) -> pl.DataFrame:
    data = {
        attribute: [
            (EPOCH + dt.timedelta(days=image[column]))
            if attribute == "Born" and image[column] is not None
            else image[column]
            for image in images
        ]
        for attribute, column in COLUMNS.items()
    }
    return pl.DataFrame(data, schema=DTYPES)


@settings(max_examples=300, deadline=None)
@given(defined=views(), history=histories(), with_table=st.booleans(), again=st.integers(0, 3))
def test_translated_runs_leave_each_view_as_its_definition_computes_it(
    defined: tuple[ViewDefinition, ...],
    history: tuple[list[dict[str, Any]], list[list[dict[str, Any]]]],
    with_table: bool,
    again: int,
) -> None:
    snapshot, runs = history
    table = TableSchema("patients", ATTRIBUTES, ("Name",), ("Job",))
    topology = Topology("t", table, defined)
    translator = ChangeTranslator(topology, COLUMNS, DTYPES, with_table=with_table)
    progress = Progress()
    held: dict[str | None, Counter[tuple[Any, ...]]] = {}
    events: list[list[bytes]] = []
    if snapshot:
        marks = ["first", *["true"] * (len(snapshot) - 2), "last"] if len(snapshot) > 1 else ["last"]
        events.append(
            [
                _event({"op": "r", "before": None, "after": row}, 0, mark)
                for row, mark in zip(snapshot, marks, strict=True)
            ]
        )
    position = 1
    for run in runs:
        sent = [_event(change, position + i) for i, change in enumerate(run)]
        # After a connector restart Debezium sends again the last changes it sent before them: skipped.
        earlier = events[-1] if events and events[-1] and b'"op": "r"' not in events[-1][0] else []
        events.append([*earlier[len(earlier) - again :], *sent] if again and earlier else sent)
        position += len(run)
    replayed = events
    for run in replayed:
        changes = [change for value in run if (change := read_change(value)) is not None]
        translated = translator.translate(changes, progress)
        for target, (withdrawn, added) in translated.rows.items():
            bag = held.setdefault(target, Counter())
            for row in withdrawn.rows():
                assert bag[row] > 0, f"{target} withdraws {row}, which it does not hold"
                bag[row] -= 1
            bag.update(added.rows())
    final = _typed([change["after"] for change in _final(snapshot, runs)])
    for view in defined:
        assert +held.get(view.name, Counter()) == _bag(view.rows_from(final)), view
    if with_table:
        assert +held.get(None, Counter()) == _bag(final)


def _final(snapshot: list[dict[str, Any]], runs: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    table = [{"after": row} for row in snapshot]
    for run in runs:
        for change in run:
            if change["before"] is not None:
                index = next(i for i, row in enumerate(table) if row["after"] == change["before"])
                del table[index]
            if change["after"] is not None:
                table.append({"after": change["after"]})
    return table


def test_a_snapshot_taken_again_stops_the_translation() -> None:
    table = TableSchema("patients", ATTRIBUTES, ("Name",), ("Job",))
    translator = ChangeTranslator(Topology("t", table, ()), COLUMNS, DTYPES, with_table=True)
    progress = Progress()
    row = {"name": "n1", "age": 1, "job": "a", "born": 0}
    first = read_change(_event({"op": "r", "before": None, "after": row}, 0, "first"))
    assert first is not None
    translator.translate([first], progress)
    with pytest.raises(ChangeError, match="took its snapshot"):
        translator.translate([first], progress)


def test_an_update_without_its_old_image_names_the_fix() -> None:
    table = TableSchema("patients", ATTRIBUTES, ("Name",), ("Job",))
    translator = ChangeTranslator(Topology("t", table, ()), COLUMNS, DTYPES, with_table=True)
    change = read_change(
        _event({"op": "u", "before": None, "after": {"name": "n1", "age": 1, "job": "a", "born": 0}}, 5)
    )
    assert change is not None
    with pytest.raises(ChangeError, match="REPLICA IDENTITY FULL"):
        translator.translate([change], Progress())
