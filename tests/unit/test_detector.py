"""The Detector: atomic batches, snapshots refused under other parameters, checks from the registry."""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path

import polars as pl
import pytest

from streamdetect.bench.incremental import micro_batches, run_incremental, taken_together
from streamdetect.check_plan import SNAPSHOT_VERSION
from streamdetect.checks.registry import REGISTRY
from streamdetect.detector import Detector
from streamdetect.engine import CHECKS, needs_table, run_checks
from streamdetect.errors import StateError, TopologyError
from streamdetect.io.sources import load_data, load_views
from streamdetect.io.topology_file import SUPPORTED_CHECKS, load_topology
from streamdetect.model.batch import Batch
from streamdetect.model.codecs import DOCUMENT_MAGIC, frame_to_ipc

TOPOLOGY = Path(__file__).resolve().parents[2] / "topologies" / "dou-patients.yaml"


def _loaded() -> tuple[Detector, dict[str, pl.DataFrame]]:
    topology = load_topology(TOPOLOGY)
    views = load_views(topology)
    detector = Detector(topology)
    detector.update(Batch(views={"v1": views["v1"]}))
    return detector, views


@pytest.mark.parametrize(
    ("batch", "error", "message"),
    [
        (lambda v: Batch(views={"v2": v["v2"], "v9": v["v1"]}), TopologyError, "unknown view 'v9'"),
        (lambda v: Batch(views={"v2": v["v2"].drop("Sex")}), TopologyError, "the view has"),
        (
            lambda v: Batch(views={"v2": v["v2"]}, retracted={"v2": v["v2"].head(1)}),
            TopologyError,
            "withdraws 1 row\\(s\\) of view 'v2', which has published none",
        ),
        (
            lambda v: Batch(views={"v2": v["v2"]}, retracted={"v1": pl.concat([v["v1"].head(1)] * 2)}),
            TopologyError,
            "more often than it is published \\(retracted row 1\\)",
        ),
        (
            lambda v: Batch(
                views={"v2": v["v2"]}, retracted={"v1": v["v1"].head(1).with_columns(pl.lit("x").alias("Job"))}
            ),
            TopologyError,
            "never published",
        ),
        (
            lambda v: Batch(views={"v2": v["v2"].with_columns(pl.col("Job").cast(pl.Categorical))}),
            TopologyError,
            "column 'Job' of 'v2' is Categorical, but earlier rows of it are String",
        ),
    ],
    ids=[
        "unknown-view",
        "missing-column",
        "withdraw-unpublished-view",
        "withdraw-twice",
        "withdraw-unknown",
        "type-changed",
    ],
)
def test_a_failing_batch_changes_nothing(batch, error, message) -> None:  # type: ignore[no-untyped-def]
    detector, views = _loaded()
    before = detector.snapshot()
    findings = sorted(f.id for f in detector.findings())
    with pytest.raises(error, match=message):
        detector.update(batch(views))
    assert detector.snapshot() == before
    assert sorted(f.id for f in detector.findings()) == findings


def test_a_snapshot_restores_the_same_findings() -> None:
    detector, views = _loaded()
    restored = Detector(load_topology(TOPOLOGY))
    restored.restore(detector.snapshot())
    assert sorted(f.id for f in restored.findings()) == sorted(f.id for f in detector.findings())
    # And it goes on from there like the original.
    assert sorted(f.id for f in restored.update(Batch(views={"v2": views["v2"]})).raised) == sorted(
        f.id for f in detector.update(Batch(views={"v2": views["v2"]})).raised
    )


def test_a_snapshot_written_before_as_json_still_restores_and_one_cut_short_is_refused() -> None:
    """Snapshots were a JSON envelope with each state in base64 (a state table kept across an upgrade holds
    one); they are binary now, and one cut short, or with bytes after its states, is refused."""
    detector, _ = _loaded()
    snapshot = detector.snapshot()
    assert snapshot.startswith(DOCUMENT_MAGIC)
    before = {
        "version": SNAPSHOT_VERSION,
        "fingerprint": detector.fingerprint,
        "states": {
            name: base64.b64encode(bytes(check.encode(detector.states[name]))).decode()
            for name, check in detector.checks.items()
        },
        "dtypes": base64.b64encode(frame_to_ipc(pl.DataFrame(schema=detector.dtypes))).decode(),
        "inputs": [],
    }
    expected = sorted(f.id for f in detector.findings())
    for data in (snapshot, json.dumps(before).encode()):
        restored = Detector(load_topology(TOPOLOGY))
        restored.restore(data)
        assert sorted(f.id for f in restored.findings()) == expected
        assert restored.snapshot() == snapshot
    for spoiled in (snapshot[:-1], snapshot + b"\0", snapshot[: len(DOCUMENT_MAGIC) + 4]):
        with pytest.raises(StateError, match="not a detector snapshot"):
            Detector(load_topology(TOPOLOGY)).restore(spoiled)


def test_restoring_under_another_k_or_topology_is_refused() -> None:
    detector, _ = _loaded()
    snapshot = detector.snapshot()
    topology = load_topology(TOPOLOGY)
    with pytest.raises(StateError, match="another topology, other checks or thresholds"):
        Detector(topology, k=3).restore(snapshot)
    renamed = dataclasses.replace(
        topology, views=tuple(dataclasses.replace(v, attributes=v.attributes[:-1]) for v in topology.views)
    )
    with pytest.raises(StateError, match="fingerprint"):
        Detector(renamed).restore(snapshot)
    with pytest.raises(StateError, match="snapshot version"):
        Detector(topology).restore(b'{"version": 99}')
    with pytest.raises(StateError, match="not a detector snapshot"):
        Detector(topology).restore(b"\xff")


def test_the_registry_is_the_one_list_of_checks() -> None:
    assert tuple(REGISTRY) == CHECKS
    assert dict(SUPPORTED_CHECKS) == {name: registration.default_k for name, registration in REGISTRY.items()}
    publisher = load_topology(TOPOLOGY.parent / "sind-figure4.yaml")
    for name, registration in REGISTRY.items():
        topology = publisher if name in ("sind", "rsind") else load_topology(TOPOLOGY)
        check = registration.build(topology, 5, None)
        assert check.name == name
        assert check.k == 5
        # The table checks read the table when the topology has its rows (they check its groups too).
        grouping = name in ("table-k-anonymity", "l-diversity") and topology.table.source is not None
        assert check.properties.needs_table == (name in ("sind", "rsind") or grouping)


def test_pieces_with_a_gap_are_refused() -> None:
    topology = load_topology(TOPOLOGY)
    views = load_views(topology)
    detector = Detector(topology)
    detector.update(Batch(views={"v1": views["v1"].head(3)}))
    detector.changes()  # written, and lost
    detector.update(Batch(views={"v1": views["v1"].slice(3)}))
    replica = Detector(topology)
    with pytest.raises(StateError, match="a piece is missing"):
        replica.apply_changes(detector.changes())
    with pytest.raises(StateError, match="belongs to no check"):
        replica.apply_changes({"nothing/rows/v1/000000000000": b""})


@pytest.mark.parametrize(("name", "reads_table"), [("yao-figure2", False), ("sind-figure3", True)])
def test_recomputed_checks_write_batches_and_refuse_a_gap(name: str, reads_table: bool) -> None:
    topology = load_topology(TOPOLOGY.parent / f"{name}.yaml")
    views, table = load_data(topology, with_table=reads_table)
    if table is not None:  # publisher-side: the table's rows are what the state keeps
        half = table.height // 2
        steps = [
            Batch(table=table.head(half)),
            Batch(table=table.slice(half)),
            Batch(retracted_table=table.head(1)),
            Batch(retracted_table=table.slice(1, 1)),
        ]
    else:
        steps = [
            Batch(views=views),
            Batch(retracted={n: f.head(1) for n, f in views.items()}),
            Batch(views=views),
            Batch(views=views),
        ]
    checks = [config.name for config in topology.checks if config.name != "linkage"]
    detector, replica = Detector(topology, checks), Detector(topology, checks)
    for step in steps[:2]:
        detector.update(step)
        pieces = detector.changes()
        assert pieces
        assert all("/batch/" in key for key in pieces if not key.startswith("inputs/"))  # (a table seen: once)
        replica.apply_changes(pieces)
        assert sorted(f.id for f in replica.findings()) == sorted(f.id for f in detector.findings())
    detector.update(steps[2])
    detector.changes()  # written, and lost
    detector.update(steps[3])
    with pytest.raises(StateError, match="a gap"):
        replica.apply_changes(detector.changes())


def test_a_table_batch_sind_refuses_changes_no_check() -> None:
    topology = load_topology(TOPOLOGY.parent / "sind-figure3.yaml")
    _, table = load_data(topology, with_table=True)
    assert table is not None
    detector = Detector(topology, ["rsind", "sind"])  # rsind first would take the rows; sind refuses them
    detector.update(Batch(table=table))
    before = detector.snapshot()
    with pytest.raises(TopologyError, match="not a key of the table"):
        detector.update(Batch(table=table.head(1)))
    assert detector.snapshot() == before


def test_a_restored_detector_still_refuses_a_changed_column_type() -> None:
    detector, views = _loaded()
    restored = Detector(load_topology(TOPOLOGY))
    restored.restore(detector.snapshot())
    before = restored.snapshot()
    with pytest.raises(TopologyError, match="earlier rows of it are String"):
        restored.update(Batch(views={"v2": views["v2"].with_columns(pl.col("Job").cast(pl.Categorical))}))
    assert restored.snapshot() == before


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("yao-figure3", "k-anonymity check needs the private table's rows \\(with effective functional"),
        ("sind-figure2", "the sind check needs the private table's rows: set table.source"),
    ],
)
def test_a_check_reading_the_table_without_one_says_which_and_why(name: str, message: str) -> None:
    topology = load_topology(TOPOLOGY.parent / f"{name}.yaml")
    views, _ = load_data(topology, with_table=False)
    assert needs_table(topology, [config.name for config in topology.checks])
    with pytest.raises(TopologyError, match=message):
        run_checks(topology, views)


def test_micro_batches_taken_together_end_in_the_same_findings() -> None:
    """bench incremental --together: several micro-batches per update (rows of several views, a view's
    rows concatenated, as a worker takes records together) end where one update per micro-batch does."""
    topology = load_topology(Path("topologies/dou-chain.yaml"))
    views = load_views(topology)
    single = micro_batches(views, 0, 1)
    merged = taken_together(single, 3)
    assert len(merged) == -(-len(single) // 3)
    assert sum(frame.height for b in merged for frame in b.views.values()) == sum(f.height for f in views.values())
    assert any(len(b.views) > 1 for b in merged)
    one = run_incremental(topology, views, batch_rows=1, prefix=0)
    three = run_incremental(topology, views, batch_rows=1, prefix=0, together=3)
    assert three["batches"] == len(merged)
    assert three["together"] == 3
    assert sorted(f["id"] for f in three["findings"]) == sorted(f["id"] for f in one["findings"])
    assert one["findings"], "the example has findings to compare"


def test_a_registration_says_it_keeps_the_views_rows_exactly_when_its_check_does() -> None:
    """The worker reads ``keeps_rows`` before it builds a check (the universal-relation stream follows
    one); the Detector asks the built check (``KeepsRows``). Both must say the same."""
    from streamdetect.checks.protocol import KeepsRows

    topology = load_topology(TOPOLOGY)
    for name, registration in REGISTRY.items():
        check = registration.build(topology, 2, None)
        assert isinstance(check, KeepsRows) == registration.keeps_rows, name


def test_each_update_times_every_check_it_folds_the_batch_into() -> None:
    """The seconds each check took to fold the last batch in, by check (a worker's per-check time metric);
    a batch the Detector refuses times nothing."""
    topology = load_topology(TOPOLOGY)
    views = load_views(topology)
    detector = Detector(topology, ["linkage", "k-anonymity"])
    assert detector.check_seconds == {}
    detector.update(Batch(views=views))
    timed = detector.check_seconds
    assert set(timed) == {"linkage", "k-anonymity"}
    assert all(seconds > 0 for seconds in timed.values())
    with pytest.raises(TopologyError):
        detector.update(Batch(views={"v9": views["v1"]}))
    assert detector.check_seconds is timed
