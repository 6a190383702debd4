"""The local broker's setup that needs no Java: what it passes to Kafka's tools."""

from __future__ import annotations

import uuid

import pytest

from streamdetect.stream import broker


def test_a_cluster_id_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0xf8 as the first byte: base64 starts with '-', which the storage tool's parser reads as an option
    # (it failed one CI run in about sixty-four).
    drawn = iter([uuid.UUID(bytes=b"\xf8" + bytes(15)), uuid.UUID(bytes=b"\x01" + bytes(15))])
    monkeypatch.setattr(broker.uuid, "uuid4", lambda: next(drawn))
    cluster = broker._cluster_id()
    assert cluster == "AQAAAAAAAAAAAAAAAAAAAA"
    monkeypatch.undo()
    assert all(not broker._cluster_id().startswith("-") for _ in range(500))
