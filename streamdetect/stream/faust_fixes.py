"""A workaround for faust-streaming's offsets around a rebalance: records fetched before it are not acked.

After a rebalance Faust's stream skips the records its fetcher still delivers with the previous
consumer generation's id (they were fetched before it: faust-streaming pull request 223) and *acks* them,
so that they do not count as lag. An ack marks the offset safe to commit: the group's offset can then
pass a record no agent processed. Whether the record comes again depends on a race: the new generation's
fetch position is the committed offset as read when the assignment starts, so when the stale ack's commit
lands first the record is never delivered again. Measured here: a restarted one-stage worker never
received the one record sent while it joined (its group had committed past it; the test timed out
twice in a day of CI runs), and a two-stage worker's first stage lost a BP batch once after one of two
workers was killed (docs/streaming.md, "View records the first stage skips").

:func:`install` makes such a record's ack mark it done without recording its offset: its offset stays
uncommitted, and the record is fetched again in the new generation, by this worker or the partition's
new owner (delivery stays at least once; a record folded twice is a replay, skipped by batch id). Faust's
compiled stream iterator inlines the ack, so the pure-Python iterator, which calls
:meth:`Message.ack`, is used instead (a few microseconds more per record, on records that carry
batches). Written against faust-streaming 0.15.3 (``faust.streams._CStreamIterator``,
``ConsumerMessage.on_final_ack``, ``Consumer._unacked_messages``); :func:`install` refuses to run on a
Faust without them rather than skip the fix silently.
"""

from __future__ import annotations

from typing import Any

import faust.streams
from faust.types.tuples import ConsumerMessage
from mode.utils.futures import notify

_MARK = "_streamdetect_generation_checked"


def install() -> None:
    """Apply the workaround (idempotent): an ack of a record fetched in an earlier consumer generation
    leaves its offset uncommitted. Raises RuntimeError when this Faust lacks what it patches."""
    if not hasattr(faust.streams, "_CStreamIterator") or not hasattr(ConsumerMessage, "on_final_ack"):
        raise RuntimeError("this faust-streaming version lacks the stream iterator the worker's fix patches")
    faust.streams._CStreamIterator = None  # the Python iterator acks through Message.ack (below)
    if getattr(ConsumerMessage.on_final_ack, _MARK, False):
        return
    original = ConsumerMessage.on_final_ack

    def on_final_ack(self: ConsumerMessage, consumer: Any) -> bool:
        generation = self.generation_id  # None: not stamped by a consumer (never stale)
        if generation is not None and generation != consumer.app.consumer_generation_id:
            # Fetched before the last rebalance: done here, but its offset is not marked safe to commit.
            self.acked = True
            consumer._unacked_messages.discard(self)
            notify(consumer._waiting_for_ack)
            return False
        return bool(original(self, consumer))

    setattr(on_final_ack, _MARK, True)
    ConsumerMessage.on_final_ack = on_final_ack  # type: ignore[method-assign]
