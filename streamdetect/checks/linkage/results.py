"""The linkage check's findings: every disclosed (E, e, S) with its minimal channel, and the facts
that make it certain.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import numpy as np
import polars as pl

from streamdetect.checks.certainty import IdentifierFacts
from streamdetect.checks.findings import LinkageFinding
from streamdetect.checks.linkage.beyond import SearchProgress, _Beyond
from streamdetect.checks.linkage.state import Flags, LinkageState
from streamdetect.checks.linkage.tasks import LinkageTask
from streamdetect.relational.closure import Channel
from streamdetect.relational.code_arrays import Codes
from streamdetect.relational.dictionary import CODE, decode, decode_frame, lookup
from streamdetect.relational.linked_values import in_memory


def _sort_key(value: object) -> tuple[str, str]:
    # Values of one column share a type; the type name only keeps mixed test data comparable.
    return (type(value).__name__, str(value) if not isinstance(value, (int, float)) else f"{value:020.6f}")


def finding_order(finding: LinkageFinding) -> tuple[object, ...]:
    """Report order: by minimal level, channel, attributes, then value (:attr:`LinkageFinding.order_key`)."""
    return finding.order_key


class _Results(_Beyond):
    """Findings from the state."""

    def result(
        self,
        state: LinkageState,
        *,
        without: frozenset[str] = frozenset(),
        only: Mapping[str, pl.Series] | None = None,
        progress: SearchProgress | None = None,
    ) -> list[LinkageFinding]:
        """Every disclosed (E, e, S) with its minimal channel, sorted. O(size of the state).

        ``without``: views to leave out, as if never published (``check --impact``): the channels that
        hold none of them are exactly the closure of the other views, so their tasks' sets are reused.
        ``only``: per identifier attribute, the codes to report on (an update's touched values); other
        identifier attributes are left out. ``progress``: of the searches above the kept levels.
        """
        order = {task.channel.views: i for i, task in enumerate(self.tasks)}
        findings: list[LinkageFinding] = []
        for identifier in self.identifiers:
            for sensitive in self.sensitive:
                if only is not None and identifier not in only:
                    continue
                codes = only.get(identifier) if only is not None else None
                findings.extend(
                    self._result_pair(
                        state, identifier, sensitive, order, without=without, codes=codes, progress=progress
                    )
                )
        return sorted(findings, key=finding_order)

    def result_withheld(self, state: LinkageState, views: frozenset[str]) -> list[LinkageFinding]:
        """:meth:`result` ``without=views`` (``check --impact``), from the open findings: a value with a
        channel of its level that holds none of ``views`` keeps its level and those channels (no channel
        is added by withholding, and lower ones did not disclose it); only the values every channel of
        whose level holds one of them are searched again, alone. When the closure is kept whole its sets
        answer at once: :meth:`result` ``without=views``."""
        if self.complete:
            return self.result(state, without=views)
        current = list(state.open.values()) if state.open is not None else self.result(state)
        kept: list[LinkageFinding] = []
        again: dict[str, list[object]] = {}
        for finding in current:
            aligned = [
                (channel, values)
                for channel, values in zip(
                    finding.channels, finding.channel_values or (finding.sensitive_values,), strict=False
                )
                if not views & set(channel)
            ]
            if not aligned:
                again.setdefault(finding.identifier_attribute, []).append(finding.identifier_value)
                continue
            channels = tuple(channel for channel, _ in aligned)
            kept.append(
                replace(
                    finding,
                    views=channels[0],
                    channels=channels,
                    channel_values=tuple(values for _, values in aligned),
                    sensitive_values=aligned[0][1],
                    joined_on=self._join_attributes(channels[0]),
                )
            )
        only = {}
        for identifier, values in again.items():
            known = state.seen.dictionaries[identifier]
            frame = pl.DataFrame({identifier: pl.Series(values, dtype=known.dtype)})
            only[identifier] = lookup(state.seen.dictionaries, frame).get_column(identifier).drop_nulls()
        searched = self.result(state, without=views, only=only) if only else []
        return sorted([*kept, *searched], key=finding_order)

    def _facts(
        self, state: LinkageState, identifier: str, codes: pl.Series, without: frozenset[str]
    ) -> dict[int, IdentifierFacts]:
        """What the views holding ``identifier`` publish about the tuples of ``codes`` (decoded)."""
        facts: dict[int, IdentifierFacts] = {}
        if codes.is_empty():
            return facts
        for view in self._proof.holders(identifier):
            if view.name in without:
                continue
            rows = state.seen.present(view.name)
            if rows is None:
                continue
            hits = rows.filter(pl.col(identifier).is_in(codes.implode()))
            decoded = decode_frame(state.seen.dictionaries, hits)
            for code, row in zip(hits.get_column(identifier).to_list(), decoded.iter_rows(named=True), strict=True):
                facts.setdefault(code, IdentifierFacts()).add_row(row, view.where)
        return facts

    def _disclosing(
        self,
        state: LinkageState,
        identifier: str,
        sensitive: str,
        without: frozenset[str],
        codes: pl.Series | None = None,
    ) -> list[tuple[LinkageTask, pl.DataFrame]]:
        """The tasks of (E, S) with identifier codes linked to fewer than k values, each with its partial
        pairs (every code of them is below k: disclosed; with ``codes``, tasks holding none of them are
        left out, O(codes) each in numpy)."""
        found = []
        for task in self.tasks:
            if task.identifier != identifier or task.sensitive != sensitive or without & set(task.channel.views):
                continue
            sets = self._sets(state, task.key)
            if sets is None or sets.partial.is_empty():
                continue
            if codes is not None and not self._holding(state, sets, identifier).at(codes).any():
                continue
            found.append((task, sets.partial))
        return found

    def _result_pair(
        self,
        state: LinkageState,
        identifier: str,
        sensitive: str,
        order: Mapping[tuple[str, ...], int],
        *,
        without: frozenset[str],
        codes: pl.Series | None = None,
        progress: SearchProgress | None = None,
    ) -> list[LinkageFinding]:
        disclosing = self._disclosing(state, identifier, sensitive, without, codes)
        beyond = not self.complete
        if not disclosing and not beyond:
            return []
        # Every disclosing task's sets of the codes asked for, grouped per (code, task), as one query (a
        # filter and a group-by per task were two queries each, for 15 tasks per pair on BP).
        query = pl.concat(
            [
                frame.lazy().select(
                    identifier,
                    sensitive,
                    pl.lit(task.channel.level, dtype=pl.UInt32).alias("_level"),
                    pl.lit(order[task.channel.views], dtype=pl.UInt32).alias("_channel"),
                )
                for task, frame in disclosing
            ]
            or [pl.LazyFrame(schema={identifier: CODE, sensitive: CODE, "_level": pl.UInt32, "_channel": pl.UInt32})]
        )
        if codes is not None:
            query = query.filter(pl.col(identifier).is_in(codes.implode()))
        query = query.group_by(identifier, "_level", "_channel").agg(pl.col(sensitive).alias("_values"))
        # The channels whose links need selections proven (certainty.py), by their index in ``order``.
        to_prove = {
            order[task.channel.views]: self._open_selections[task.key]
            for task, _ in disclosing
            if self._open_selections[task.key]
        }
        by_index = {order[task.channel.views]: task.channel.views for task in self.tasks}
        # One query when nothing needs proving or searching above the kept levels (a stream update's
        # common case); otherwise the disclosures are read first.
        everything: pl.LazyFrame = query.with_columns(pl.lit(True).alias("_proven"))
        if to_prove:
            read = in_memory(query)
            unproven = read.filter(pl.col("_channel").is_in(list(to_prove))).get_column(identifier).unique()
            facts = self._facts(state, identifier, unproven, without)
            pairs = zip(read.get_column(identifier), read.get_column("_channel"), strict=True)
            proven = [
                channel not in to_prove or self._proof.proven(facts.get(code), to_prove[channel])
                for code, channel in pairs
            ]
            everything = read.lazy().with_columns(pl.Series("_proven", proven, dtype=pl.Boolean))
        unsettled: dict[int, int] = {}
        if beyond:
            searched = self._with_beyond(
                state,
                identifier,
                sensitive,
                in_memory(everything),
                by_index=by_index,
                without=without,
                codes=codes,
                unsettled=unsettled,
                progress=progress,
            )
            if searched.is_empty():
                return []
            everything = searched.lazy()
        # A proven channel makes the finding certain: report the lowest level among proven channels;
        # with none proven, the lowest level of all, as a possible link.
        chosen = everything.filter(pl.col("_proven") | ~pl.col("_proven").any().over(identifier))
        minimal = in_memory(
            chosen.filter(pl.col("_level") == pl.col("_level").min().over(identifier))
            .sort("_channel")
            .group_by(identifier, maintain_order=True)
            .agg(pl.col("_channel"), pl.col("_values"), pl.col("_proven").first())
            .sort(identifier)
        )
        dictionaries = state.seen.dictionaries
        identifiers = decode(dictionaries, identifier, minimal.get_column(identifier).to_list())
        # The sensitive values of every finding in one gather (not one decode per finding).
        used = minimal.get_column("_values").explode().explode().unique().drop_nulls().sort().to_list()
        sensitive_value = dict(zip(used, decode(dictionaries, sensitive, used), strict=True))
        findings = []
        for value, (code, indices, value_codes, certain) in zip(identifiers, minimal.iter_rows(), strict=True):
            members = tuple(by_index[i] for i in indices)
            channel_values = tuple(
                tuple(sorted((sensitive_value[code] for code in codes), key=_sort_key)) for codes in value_codes
            )
            findings.append(
                LinkageFinding(
                    k=self.k,
                    identifier_attribute=identifier,
                    identifier_value=value,  # type: ignore[arg-type]
                    sensitive_attribute=sensitive,
                    sensitive_values=channel_values[0],
                    views=members[0],
                    channels=members,
                    certain=bool(certain),
                    channel_values=channel_values,
                    joined_on=self._join_attributes(members[0]),
                    searched_below=unsettled.get(code),
                )
            )
        return findings

    def _present_codes(self, state: LinkageState, identifier: str, without: frozenset[str]) -> Codes:
        """The codes of ``identifier`` in the rows present of the views holding it (sorted)."""
        parts = []
        for view in self._proof.holders(identifier):
            rows = state.seen.present(view.name) if view.name not in without else None
            if rows is not None and rows.height:
                parts.append(rows.get_column(identifier).drop_nulls().unique().to_numpy())
        return np.unique(np.concatenate(parts)) if parts else np.empty(0, np.uint32)

    def _with_beyond(
        self,
        state: LinkageState,
        identifier: str,
        sensitive: str,
        everything: pl.DataFrame,
        *,
        by_index: dict[int, tuple[str, ...]],
        without: frozenset[str],
        codes: pl.Series | None,
        unsettled: dict[int, int],
        progress: SearchProgress | None,
    ) -> pl.DataFrame:
        """``everything`` (the kept levels' disclosures) with those of the levels above, searched for the
        codes without a proven disclosure in the kept levels (``beyond.py``); ``by_index`` learns the
        channels found there, numbered after the kept ones in (level, views) order; ``unsettled`` the codes
        whose search stopped (the budget), with the level it stopped at."""
        active = self._present_codes(state, identifier, without)
        if codes is not None:
            active = np.intersect1d(active, codes.to_numpy())
        settled = everything.filter(pl.col("_proven")).get_column(identifier).to_numpy()
        active = np.setdiff1d(active, settled)

        def proven(channel: Channel, found: Codes) -> Flags:
            selections = self._proof.open_selections(channel.views, identifier)
            if not selections:
                return np.ones(found.size, bool)
            facts = self._facts(state, identifier, pl.Series(identifier, found, dtype=CODE), without)
            return np.array([self._proof.proven(facts.get(int(code)), selections) for code in found], bool)

        found = self._beyond(state, identifier, sensitive, active, without=without, proven=proven, progress=progress)
        unsettled.update(found.unsettled)
        if not found.codes:
            return everything
        ranked = sorted(set(found.channels))  # Channel sorts by its views; levels first, below
        ranked.sort(key=lambda channel: channel.level)
        start = max(by_index, default=-1) + 1
        index = {channel: start + i for i, channel in enumerate(ranked)}
        by_index.update({index[channel]: channel.views for channel in ranked})
        channels = pl.Series("_channel", [index[c] for c in found.channels], dtype=pl.UInt32)
        rows_of: dict[Channel, list[int]] = {}
        for position, channel in enumerate(found.channels):
            rows_of.setdefault(channel, []).append(position)
        proven_found = np.zeros(len(found.codes), bool)
        codes_found = np.array(found.codes, dtype=np.uint32)
        for channel, rows in rows_of.items():
            proven_found[rows] = proven(channel, codes_found[rows])
        extra = pl.DataFrame(
            {
                identifier: pl.Series(found.codes, dtype=CODE),
                "_level": pl.Series([c.level for c in found.channels], dtype=pl.UInt32),
                "_channel": channels,
                "_values": pl.Series(found.values, dtype=pl.List(CODE)),
                "_proven": pl.Series(proven_found, dtype=pl.Boolean),
            }
        )
        # A channel the descent ends in may have been joined for the value before (an unproven disclosure
        # below the level the search stopped at): one row per (value, channel).
        extra = extra.unique(subset=[identifier, "_channel"], keep="first", maintain_order=True)
        return pl.concat([everything, extra.select(everything.columns)])
