"""The universal-relation stream: the joined tuples each batch adds to the closure's channels.

Dou & Coulondre (section 3.3) merge the tuples of the leveled closure's joined views into one
universal-relation stream over the union schema (absent attributes null, the channel named), on which
the continuous count-equals-one queries run. ``closure --universal`` writes it once over files
(:func:`streamdetect.relational.universal.universal_relation`); this is the same stream kept as the data
arrives, for the worker's universal-relation topic.

Which tuples: those of the channels that matter to linkage, the channels holding an identifier and a
sensitive attribute (where a count-equals-one leak can be). Each channel's joined view is a set, as in
``closure --universal`` (every view's distinct rows): a batch emits the tuples that hold one of its rows
new to its view (``delta(A ⋈ B) = dA ⋈ B + A' ⋈ dB``, views taken one after the other), so the tuples
emitted over a stream of additions are, together, exactly the channels' joined views. Each channel emits
at most ``cap`` tuples over the stream's life (the cap ``closure --universal`` puts per channel); a
channel at its cap costs nothing more. Withdrawals take rows out of the views joined later, but tuples
emitted are not taken back: the findings topic's ``cleared`` events say what a withdrawal undid.

Cost per batch, for each channel of a view the batch adds to and still under its cap: a Yannakakis
reduction of the channel's views (linear in their distinct rows) and at most the remaining cap of joined
tuples (:func:`streamdetect.relational.materialise.materialise`). State: the rows present per view (bags,
as the Detector's) and the tuples emitted per channel; the rows are rebuilt from the Detector on restore,
only the counts are written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

import polars as pl

from streamdetect.errors import TopologyError
from streamdetect.model.batch import Batch
from streamdetect.model.topology import Topology
from streamdetect.relational.bags import remove_occurrences
from streamdetect.relational.closure import Channel
from streamdetect.relational.materialise import materialise
from streamdetect.relational.universal import CHANNEL_COLUMN, LEVEL_COLUMN, ClosureTooLarge, channels_up_to

#: Version of the emitted counts piece.
UNIVERSAL_VERSION = 1
#: The channels a universal-relation stream may emit: past them the stream is refused at the start.
UNIVERSAL_CHANNELS = 10_000


@dataclass
class UniversalState:
    """The rows present per view, and the tuples emitted per channel label."""

    present: dict[str, pl.DataFrame] = field(default_factory=dict)
    emitted: dict[str, int] = field(default_factory=dict)


class UniversalStream:
    """The universal-relation stream of a topology's views (module docstring).

    ``cap``: tuples per channel over the stream's life. ``owner``: emit only the channels whose first
    identifier (in the table's order) is this one (a worker's unit of one identifier; None: every
    channel), so that units splitting the work by identifier emit each channel once.
    """

    def __init__(self, topology: Topology, cap: int, owner: str | None = None, max_level: int | None = None) -> None:
        self.cap = cap
        table = topology.table
        self.attributes = {view.name: list(view.attributes) for view in topology.views}
        self.channels: list[Channel] = []
        try:
            levels = channels_up_to(topology.views, table.attributes, max_level, limit=UNIVERSAL_CHANNELS)
        except ClosureTooLarge as error:
            raise TopologyError(
                f"the universal-relation stream emits every channel of the closure, and {error}: "
                "too many to stream; leave the stream off or bound the closure's level"
            ) from None
        for level in levels:
            for channel in level:
                holds = [a for a in table.identifiers if a in channel.attributes]
                if holds and any(a in channel.attributes for a in table.sensitive) and owner in (None, holds[0]):
                    self.channels.append(channel)
        self.order = [a for a in table.attributes if any(a in c.attributes for c in self.channels)]

    def initialize(self, present: Mapping[str, pl.DataFrame] | None = None) -> UniversalState:
        """A state holding ``present`` (the views' rows a restored Detector holds), nothing emitted."""
        rows = {name: frame.select(self.attributes[name]) for name, frame in (present or {}).items()}
        return UniversalState(present=rows)

    def update(self, state: UniversalState, batch: Batch) -> list[tuple[Channel, pl.DataFrame]]:
        """Fold the batch's withdrawals, then its additions view by view; the tuples each channel gains
        (over the union schema of the channels emitted, with ``_channel`` and ``_level``), capped."""
        for view, rows in batch.retracted.items():
            if rows.height and view in state.present:
                state.present[view] = remove_occurrences(state.present[view], rows.select(self.attributes[view]), view)
        out: list[tuple[Channel, pl.DataFrame]] = []
        for view, rows in batch.views.items():
            if rows.height:
                out += self._add(state, view, rows.select(self.attributes[view]))
        return out

    def _add(self, state: UniversalState, view: str, rows: pl.DataFrame) -> list[tuple[Channel, pl.DataFrame]]:
        """One view's new rows: the tuples they add to each channel under its cap (dV joined with the
        channel's other views as they are), then the rows kept."""
        before = state.present.get(view)
        fresh = rows.unique(maintain_order=True)
        if before is not None and before.height:  # rows already present add no tuple to a set
            fresh = fresh.join(before.unique(), on=list(fresh.columns), how="anti", nulls_equal=True)
        out = []
        for channel in self.channels if fresh.height else ():
            room = self.cap - state.emitted.get(channel.label, 0)
            others = [state.present.get(name) for name in channel.views if name != view]
            if view not in channel.views or room <= 0 or any(o is None or o.is_empty() for o in others):
                continue  # not the view's channel, at its cap, or a view of it holds no row yet
            relations = {name: fresh if name == view else state.present[name].unique() for name in channel.views}
            joined = materialise(relations, room)
            if joined.height:
                state.emitted[channel.label] = state.emitted.get(channel.label, 0) + joined.height
                out.append((channel, self._shaped(channel, joined, state)))
        state.present[view] = rows if before is None else pl.concat([before, rows], how="vertical_relaxed")
        return out

    def _shaped(self, channel: Channel, joined: pl.DataFrame, state: UniversalState) -> pl.DataFrame:
        """The tuples over the union schema: absent attributes null (of the type the views give them,
        else of type Null), the channel and its level added."""
        types = {a: dtype for frame in state.present.values() for a, dtype in frame.schema.items()}
        columns = [
            pl.col(a) if a in channel.attributes else pl.lit(None, dtype=types.get(a, pl.Null)).alias(a)
            for a in self.order
        ]
        return joined.select(columns).with_columns(
            pl.lit(channel.label).alias(CHANNEL_COLUMN), pl.lit(channel.level).alias(LEVEL_COLUMN)
        )

    def counts(self, state: UniversalState) -> bytes:
        """The tuples emitted per channel, as a piece to write."""
        return json.dumps({"version": UNIVERSAL_VERSION, "emitted": state.emitted}, sort_keys=True).encode()

    def restore_counts(self, state: UniversalState, piece: bytes) -> None:
        """Take the counts of :meth:`counts` back; ``ValueError`` for another version."""
        document = json.loads(piece)
        if not isinstance(document, dict) or document.get("version") != UNIVERSAL_VERSION:
            raise ValueError(f"universal stream counts of another version ({piece[:40]!r})")
        state.emitted = {str(label): int(count) for label, count in document["emitted"].items()}
