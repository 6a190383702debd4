"""The linkage check's findings: every disclosed (E, e, S) with its minimal channel, and the facts
that make it certain.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from streamdetect.checks.certainty import IdentifierFacts
from streamdetect.checks.findings import LinkageFinding
from streamdetect.checks.linkage.projections import _Projections
from streamdetect.checks.linkage.state import (
    LinkageState,
)
from streamdetect.checks.linkage.tasks import LinkageTask
from streamdetect.relational.dictionary import decode, decode_frame
from streamdetect.relational.linked_values import in_memory


def _sort_key(value: object) -> tuple[str, str]:
    # Values of one column share a type; the type name only keeps mixed test data comparable.
    return (type(value).__name__, str(value) if not isinstance(value, (int, float)) else f"{value:020.6f}")


def finding_order(finding: LinkageFinding) -> tuple[object, ...]:
    """Report order: by minimal level, channel, attributes, then value (:attr:`LinkageFinding.order_key`)."""
    return finding.order_key


class _Results(_Projections):
    """Findings from the state."""

    def result(
        self,
        state: LinkageState,
        *,
        without: frozenset[str] = frozenset(),
        only: Mapping[str, pl.Series] | None = None,
    ) -> list[LinkageFinding]:
        """Every disclosed (E, e, S) with its minimal channel, sorted. O(size of the state).

        ``without``: views to leave out, as if never published (``check --impact``): the channels that
        hold none of them are exactly the closure of the other views, so their tasks' sets are reused.
        ``only``: per identifier attribute, the codes to report on (an update's touched values); other
        identifier attributes are left out.
        """
        order = {task.channel.views: i for i, task in enumerate(self.tasks)}
        findings: list[LinkageFinding] = []
        for identifier in self.identifiers:
            for sensitive in self.sensitive:
                if only is not None and identifier not in only:
                    continue
                codes = only.get(identifier) if only is not None else None
                findings.extend(self._result_pair(state, identifier, sensitive, order, without=without, codes=codes))
        return sorted(findings, key=finding_order)

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
    ) -> list[LinkageFinding]:
        disclosing = self._disclosing(state, identifier, sensitive, without, codes)
        if not disclosing:
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
        if to_prove:
            everything = in_memory(query)
            unproven = everything.filter(pl.col("_channel").is_in(list(to_prove))).get_column(identifier).unique()
            facts = self._facts(state, identifier, unproven, without)
            pairs = zip(everything.get_column(identifier), everything.get_column("_channel"), strict=True)
            proven = [
                channel not in to_prove or self._proof.proven(facts.get(code), to_prove[channel])
                for code, channel in pairs
            ]
            query = everything.lazy().with_columns(pl.Series("_proven", proven, dtype=pl.Boolean))
        else:
            query = query.with_columns(pl.lit(True).alias("_proven"))
        # A proven channel makes the finding certain: report the lowest level among proven channels;
        # with none proven, the lowest level of all, as a possible link.
        chosen = query.filter(pl.col("_proven") | ~pl.col("_proven").any().over(identifier))
        minimal = in_memory(
            chosen.filter(pl.col("_level") == pl.col("_level").min().over(identifier))
            .sort("_channel")
            .group_by(identifier, maintain_order=True)
            .agg(pl.col("_channel"), pl.col("_values"), pl.col("_proven").first())
            .sort(identifier)
        )
        by_index = {order[task.channel.views]: task.channel.views for task in self.tasks}
        dictionaries = state.seen.dictionaries
        identifiers = decode(dictionaries, identifier, minimal.get_column(identifier).to_list())
        # The sensitive values of every finding in one gather (not one decode per finding).
        used = minimal.get_column("_values").explode().explode().unique().drop_nulls().sort().to_list()
        sensitive_value = dict(zip(used, decode(dictionaries, sensitive, used), strict=True))
        findings = []
        for value, (_, indices, value_codes, certain) in zip(identifiers, minimal.iter_rows(), strict=True):
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
                    joined_on=self._joined_on[members[0]],
                )
            )
        return findings
