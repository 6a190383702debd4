"""The kafka-python side of the stream (publishers, readers of whole topics): what makes it fast enough,
and when a read gives up."""

from __future__ import annotations

import pytest
from kafka.record import util

from streamdetect.stream import publish


def test_kafka_python_computes_record_crcs_in_c() -> None:
    # kafka-python falls back silently to a pure-Python CRC-32C (about 2 MB/s) when the crc32c package is
    # missing: every batch a publisher writes and every batch a reader checks goes through it.
    import crc32c

    assert util.crc32c_c is crc32c.crc32c
    assert util.calc_crc32c.__defaults__ == (crc32c.crc32c,)
    assert util.calc_crc32c(b"123456789") == 0xE3069283  # CRC-32C's check value


def test_a_read_stalls_only_when_no_record_comes(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]
    monkeypatch.setattr(publish.time, "monotonic", lambda: now[0])
    stalled = publish._Stall(30.0)
    # A long read that keeps moving never times out, however long it takes.
    for step in range(1, 200):
        now[0] = step * 10.0
        assert not stalled(step)
    now[0] += 30.0
    assert not stalled(199)  # 30 s without progress: not yet
    now[0] += 0.5
    assert stalled(199)
    assert not stalled(200)  # progress again
