"""The worker's workaround for Faust acking records fetched before a rebalance (no broker needed)."""

from __future__ import annotations

import faust
import faust.streams
from faust.types import TP
from faust.types.tuples import ConsumerMessage

from streamdetect.stream import faust_fixes


def _acked_offsets(generation: int | None, current: int) -> list[int]:
    """The offsets a consumer would commit after a stream acks one record fetched in ``generation``
    while the consumer's generation is ``current``."""
    app = faust.App("streamdetect-faust-fixes", broker="kafka://127.0.0.1:1")
    app.consumer_generation_id = current
    app.topics._acking_topics.add("t")  # an agent's topic: its acks count
    consumer = app.consumer
    tp = TP("t", 0)
    message = ConsumerMessage("t", 0, 5, 0.0, 0, [], b"k", b"v", None, tp=tp, generation_id=generation)
    message.incref()
    consumer._unacked_messages.add(message)
    message.ack(consumer)
    assert message.acked
    assert message not in consumer._unacked_messages  # never waited for by a rebalance
    return list(consumer._acked.get(tp, []))


def test_a_record_fetched_before_the_last_rebalance_is_not_committed() -> None:
    faust_fixes.install()
    faust_fixes.install()  # idempotent
    assert faust.streams._CStreamIterator is None  # the Python iterator, which acks through the patch
    assert _acked_offsets(generation=3, current=4) == []  # stale: fetched again in generation 4
    assert _acked_offsets(generation=4, current=4) == [5]  # current: safe to commit, as before
    assert _acked_offsets(generation=None, current=4) == [5]  # not stamped: as before
