"""Where a dead letter is keyed: where its record was read, or for a route record the view record it came
from (no broker: the worker's outputs with a producer that keeps what it is given)."""

from __future__ import annotations

import asyncio
from typing import Any

from streamdetect.stream.records import DeadLetter
from streamdetect.stream.routing import HEADER_SOURCE
from streamdetect.stream.state_log import Source
from streamdetect.stream.worker.outputs import Outputs

ROUTE, VIEW = "bp.route", "bp.view.v2"


def _outputs(sent: list[Any]) -> Outputs:
    outputs = Outputs.__new__(Outputs)  # the topics and producer of a running app are not needed here
    outputs.dead_letters = "bp.dead-letters"
    outputs.route = ROUTE

    async def produce(records: list[Any]) -> None:
        sent.extend(records)

    outputs._produce = produce  # type: ignore[method-assign]
    return outputs


def test_only_a_route_record_is_keyed_by_its_source_header() -> None:
    sent: list[Any] = []
    outputs = _outputs(sent)
    named = [(HEADER_SOURCE, Source("bp.view.v1", 2, 7).encode())]
    letter = DeadLetter("not_json", "the value is not JSON")
    # A view record whose publisher set the header (stage one strips it when it routes): keyed where read.
    asyncio.run(outputs.dead_letter_of(b"{", named, VIEW, letter, partition=0, offset=5))
    # A route record: keyed by the view record stage one read it from.
    asyncio.run(outputs.dead_letter_of(b"{", named, ROUTE, letter, partition=1, offset=9))
    assert [key for _, key, *_ in sent] == [b"bp.view.v2:0:5", b"bp.view.v1:2:7"]
    assert all(("streamdetect-reason", b"not_json") in headers for *_, headers in sent)
