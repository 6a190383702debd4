"""The worker's workaround for Faust acking records no agent received (no broker needed)."""

from __future__ import annotations

import faust
import faust.streams
from faust.types import TP
from faust.types.tuples import ConsumerMessage

from streamdetect.stream import faust_fixes


def _acked_offsets(*, handed_to_an_agent: bool) -> list[int]:
    """The offsets a consumer would commit after a stream acks one record (skipped, as stale or while the
    flow is suspended, or handed to an agent, which Faust marks as tracked)."""
    app = faust.App("streamdetect-faust-fixes", broker="kafka://127.0.0.1:1")
    app.topics._acking_topics.add("t")  # an agent's topic: its acks count
    consumer = app.consumer
    tp = TP("t", 0)
    message = ConsumerMessage("t", 0, 5, 0.0, 0, [], b"k", b"v", None, tp=tp, generation_id=3)
    message.tracked = handed_to_an_agent
    message.incref()
    consumer._unacked_messages.add(message)
    message.ack(consumer)
    assert message.acked
    assert message not in consumer._unacked_messages  # never waited for by a rebalance
    return list(consumer._acked.get(tp, []))


def test_a_record_no_agent_received_is_not_committed() -> None:
    faust_fixes.install()
    faust_fixes.install()  # idempotent
    assert faust.streams._CStreamIterator is None  # the Python iterator, which acks through the patch
    assert _acked_offsets(handed_to_an_agent=False) == []  # skipped by the stream: fetched again
    assert _acked_offsets(handed_to_an_agent=True) == [5]  # processed: safe to commit, as before
