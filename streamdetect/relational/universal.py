"""The paper's data-merging step (Dou & Coulondre, section 3.3): channels' joined views as one stream.

Every joined view of the leveled closure, over the union schema, absent attributes null, with the
channel and level as extra columns; each channel capped at a row count, with its exact full count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from streamdetect.model.topology import ViewDefinition
from streamdetect.relational.closure import Channel, channels_by_level
from streamdetect.relational.join_count import EXACT_LIMIT, join_count
from streamdetect.relational.materialise import materialise

CHANNEL_COLUMN = "_channel"
LEVEL_COLUMN = "_level"


@dataclass(frozen=True)
class ChannelSize:
    """A channel and the row count of its joined view (exact up to 2^53)."""

    channel: Channel
    rows: float

    @property
    def exact(self) -> bool:
        return self.rows < EXACT_LIMIT


def _relations(channel: Channel, views: Mapping[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    return {name: views[name].unique() for name in channel.views}


def channel_sizes(
    definitions: Sequence[ViewDefinition],
    views: Mapping[str, pl.DataFrame],
    attribute_order: Sequence[str],
    max_level: int | None = None,
) -> list[list[ChannelSize]]:
    """Every channel of the closure with its joined view's row count, by level; no join materialised."""
    return [
        [ChannelSize(channel, join_count(_relations(channel, views))) for channel in level]
        for level in channels_by_level(definitions, attribute_order, max_level)
    ]


def universal_relation(
    definitions: Sequence[ViewDefinition],
    views: Mapping[str, pl.DataFrame],
    attribute_order: Sequence[str],
    max_rows_per_channel: int,
    max_level: int | None = None,
) -> pl.DataFrame:
    """The merged stream: each channel's joined view (at most ``max_rows_per_channel`` rows) stacked."""
    parts = []
    for level in channels_by_level(definitions, attribute_order, max_level):
        for channel in level:
            joined = materialise(_relations(channel, views), max_rows_per_channel)
            parts.append(
                joined.select(list(channel.attributes)).with_columns(
                    pl.lit(channel.label).alias(CHANNEL_COLUMN), pl.lit(channel.level).alias(LEVEL_COLUMN)
                )
            )
    columns = [a for a in attribute_order if any(a in part.columns for part in parts)]
    merged = pl.concat(parts, how="diagonal_relaxed") if parts else pl.DataFrame()
    return merged.select([*columns, CHANNEL_COLUMN, LEVEL_COLUMN]) if parts else merged
