"""The paper's data-merging step (Dou & Coulondre, section 3.3): channels' joined views as one stream.

Every joined view of the leveled closure, over the union schema, absent attributes null, with the
channel and level as extra columns; each channel capped at a row count, with its exact full count.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from streamdetect.model.topology import ViewDefinition
from streamdetect.relational.closure import Channel, channels_by_level, iter_levels
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


class ClosureTooLarge(ValueError):
    """The closure has more channels than a listing was allowed; ``level`` is where it passed."""

    def __init__(self, message: str, *, level: int) -> None:
        super().__init__(message)
        self.level = level


def channels_up_to(
    definitions: Sequence[ViewDefinition],
    attribute_order: Sequence[str],
    max_level: int | None = None,
    *,
    holding: frozenset[str] = frozenset(),
    limit: int | None = None,
) -> list[list[Channel]]:
    """The channels of the closure by level (those holding ``holding``), enumerated level by level;
    raises :class:`ClosureTooLarge` naming the level at which they pass ``limit``, before any join."""
    levels: list[list[Channel]] = []
    total = 0
    for channels, _ in iter_levels(definitions, attribute_order, max_level, holding):
        total += len(channels)
        if limit is not None and total > limit:
            raise ClosureTooLarge(
                f"the closure passes {limit:,} channels at level {len(levels) + 1} ({total:,} so far, "
                f"{len(definitions)} views)",
                level=len(levels) + 1,
            )
        levels.append(channels)
    return levels


def channel_sizes(
    definitions: Sequence[ViewDefinition],
    views: Mapping[str, pl.DataFrame],
    attribute_order: Sequence[str],
    max_level: int | None = None,
    *,
    holding: frozenset[str] = frozenset(),
    limit: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[list[ChannelSize]]:
    """Every channel of the closure (holding ``holding``) with its joined view's row count, by level; no
    join materialised. ``progress(done, total)`` after each count."""
    levels = channels_up_to(definitions, attribute_order, max_level, holding=holding, limit=limit)
    total = sum(len(level) for level in levels)
    sizes: list[list[ChannelSize]] = []
    done = 0
    for level in levels:
        sizes.append([])
        for channel in level:
            sizes[-1].append(ChannelSize(channel, join_count(_relations(channel, views))))
            done += 1
            if progress is not None:
                progress(done, total)
    return sizes


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
