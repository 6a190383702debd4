"""The worker's seek back of partitions whose committed offset stops short of their end (no broker)."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import pytest
from faust.types import TP

from streamdetect.stream.worker import catch_up
from streamdetect.stream.worker.catch_up import TAIL_CHECK_S, UNSTICK_S, Unstick

STUCK, DONE, OTHER = TP("view.v2", 0), TP("view.v2", 1), TP("elsewhere", 0)


class _Consumer:
    def __init__(self) -> None:
        self.sought: list[tuple[TP, int]] = []
        self.looks = 0  # committed-offset look-ups at the broker
        self.end = 20

    def assignment(self) -> set[TP]:
        return {STUCK, DONE, OTHER}

    def highwater(self, tp: TP) -> int:
        return self.end

    async def seek(self, tp: TP, offset: int) -> None:
        self.sought.append((tp, offset))


def _unstick(
    monkeypatch: pytest.MonkeyPatch, committed: dict[tuple[str, int], int] | None = None
) -> tuple[Unstick, _Consumer]:
    consumer = _Consumer()
    app: Any = SimpleNamespace(rebalancing=False, in_recovery=False, conf=SimpleNamespace(id="g"), consumer=consumer)
    offsets = committed if committed is not None else {("view.v2", 0): 11, ("view.v2", 1): 20, ("elsewhere", 0): 3}

    def looked_up(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
        consumer.looks += 1
        return offsets

    monkeypatch.setattr(catch_up, "committed_offsets", looked_up)
    return Unstick(app, "127.0.0.1:1", ["view.v2"]), consumer


def test_an_idle_worker_seeks_a_partition_short_of_its_end_back_to_its_committed_offset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    unstick, consumer = _unstick(monkeypatch)
    asyncio.run(unstick.check())
    assert consumer.sought == []  # just started: not idle yet
    unstick.active_at = time.monotonic() - TAIL_CHECK_S - 1
    asyncio.run(unstick.check())
    assert consumer.sought == []  # its first look at the assignment: the idle clock starts there
    assert unstick.assigned == {STUCK, DONE}
    unstick.active_at = time.monotonic() - TAIL_CHECK_S - 1
    asyncio.run(unstick.check())
    assert consumer.sought == [(STUCK, 11)]  # not the committed partition, not another topic's
    asyncio.run(unstick.check())
    assert consumer.sought == [(STUCK, 11)]  # at most once per UNSTICK_S
    unstick.sought[STUCK] -= UNSTICK_S
    asyncio.run(unstick.check())
    assert consumer.sought == [(STUCK, 11), (STUCK, 11)]
    unstick.touch()  # an agent took a record: not idle
    unstick.sought.clear()
    asyncio.run(unstick.check())
    assert len(consumer.sought) == 2


def test_a_new_assignment_restarts_the_idle_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    unstick, consumer = _unstick(monkeypatch)
    unstick.assigned = frozenset({DONE})  # before a rebalance that brought STUCK here
    unstick.active_at = time.monotonic() - TAIL_CHECK_S - 1
    asyncio.run(unstick.check())
    assert consumer.sought == []
    assert time.monotonic() - unstick.active_at < TAIL_CHECK_S


def test_no_seek_during_a_rebalance_or_a_table_recovery(monkeypatch: pytest.MonkeyPatch) -> None:
    unstick, consumer = _unstick(monkeypatch)
    unstick.assigned = frozenset({STUCK, DONE})
    for busy in ("rebalancing", "in_recovery"):
        setattr(unstick.app, busy, True)
        unstick.active_at = time.monotonic() - TAIL_CHECK_S - 1
        asyncio.run(unstick.check())
        assert consumer.sought == []
        setattr(unstick.app, busy, False)


def test_a_look_that_found_every_partition_at_its_end_is_not_repeated_until_something_moves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    unstick, consumer = _unstick(monkeypatch, {("view.v2", 0): 20, ("view.v2", 1): 20})
    unstick.assigned = frozenset({STUCK, DONE})
    unstick.active_at = time.monotonic() - TAIL_CHECK_S - 1
    asyncio.run(unstick.check())
    asyncio.run(unstick.check())
    assert (consumer.looks, consumer.sought) == (1, [])  # idle and nothing published since: no second look
    consumer.end = 23  # records published since
    asyncio.run(unstick.check())
    assert (consumer.looks, sorted(consumer.sought)) == (2, [(STUCK, 20), (DONE, 20)])  # in any order
    asyncio.run(unstick.check())
    assert consumer.looks == 3  # a look that found a partition short is repeated (throttled seeks)
