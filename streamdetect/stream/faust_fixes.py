"""A workaround for faust-streaming's offsets around a rebalance: records no agent received are not acked.

Around a rebalance Faust's stream skips the records its fetcher still delivers while the flow is
suspended or under the previous consumer generation's id (fetched before it: faust-streaming pull
request 223), and *acks* them so that they do not count as lag. An ack marks the offset safe to commit:
the group's offset can then pass records no agent processed, and whether they come again depends on a
race (the new generation's fetch position is the committed offset as read when the assignment starts).
Measured here: a restarted one-stage worker never received the one record sent while it joined (a test
timed out twice in a day of CI runs); a two-stage worker's first stage lost a BP batch once after one of
two workers was killed, and with the view-offset check in place the second stage found view records and
route records (67 in a row once) that the group had committed without any agent receiving them
(docs/streaming.md, "View records the first stage skips").

:func:`install` makes the ack of a record that was never handed to an agent (Faust marks the records it
hands over as *tracked*) mark it done without recording its offset: the offset stays uncommitted and the
record is fetched again, by this worker or the partition's new owner (delivery stays at least once; a
record folded twice is a replay, skipped by batch id). Faust's compiled stream iterator inlines the ack,
so the pure-Python iterator, which calls :meth:`Message.ack`, is used instead (a few microseconds more
per record, on records that carry batches). Written against faust-streaming 0.15.3
(``faust.streams._CStreamIterator``, ``ConsumerMessage.on_final_ack`` and ``tracked``,
``Consumer._unacked_messages``); :func:`install` refuses to run on a Faust without them rather than
skip the fix silently.
"""

from __future__ import annotations

from typing import Any

import faust.streams
from faust.types.tuples import ConsumerMessage
from mode.utils.futures import notify

_MARK = "_streamdetect_untracked_kept"


def install() -> None:
    """Apply the workaround (idempotent): the ack of a record no agent received leaves its offset
    uncommitted. Raises RuntimeError when this Faust lacks what it patches."""
    if not hasattr(faust.streams, "_CStreamIterator") or not hasattr(ConsumerMessage, "on_final_ack"):
        raise RuntimeError("this faust-streaming version lacks the stream iterator the worker's fix patches")
    faust.streams._CStreamIterator = None  # the Python iterator acks through Message.ack (below)
    if getattr(ConsumerMessage.on_final_ack, _MARK, False):
        return
    original = ConsumerMessage.on_final_ack

    def on_final_ack(self: ConsumerMessage, consumer: Any) -> bool:
        if not self.tracked:
            # Skipped by the stream, never handed to an agent: done here, its offset not safe to commit.
            self.acked = True
            consumer._unacked_messages.discard(self)
            notify(consumer._waiting_for_ack)
            return False
        return bool(original(self, consumer))

    setattr(on_final_ack, _MARK, True)
    ConsumerMessage.on_final_ack = on_final_ack  # type: ignore[method-assign]
