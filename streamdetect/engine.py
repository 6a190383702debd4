"""Run a topology's checks over its views' rows and gather a :class:`Report`. Pure: frames in, report out.

The batch ``check`` and the streaming worker share this code: both build the checks here and feed rows
through their ``update``; a batch run is one update with every row.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import polars as pl

from streamdetect.checks.findings import AssociationCoverFinding, LinkageFinding, RsindFinding, SindFinding
from streamdetect.checks.forcing_views import minimal_forcing_views
from streamdetect.checks.indistinguishability import SindCheck
from streamdetect.checks.k_anonymity import k_anonymity_check
from streamdetect.checks.k_anonymity import needs_table as k_anonymity_needs_table
from streamdetect.checks.linkage import LinkageCheck, run_linkage
from streamdetect.checks.recomputed import RecomputedCheck
from streamdetect.checks.restricted_indistinguishability import RsindCheck
from streamdetect.errors import TopologyError
from streamdetect.model.topology import IDENTIFIER_CHECKS, Topology

Finding = LinkageFinding | AssociationCoverFinding | SindFinding | RsindFinding
#: What fails a run: any finding, or only certain ones (``check --fail-on``).
FailOn = Literal["any", "certain"]
#: Checks this version runs, in report order.
CHECKS: tuple[str, ...] = ("linkage", "k-anonymity", "sind", "rsind")
#: Checks that read the private table itself (publisher-side).
TABLE_CHECKS: frozenset[str] = frozenset({"sind", "rsind"})


def checks_to_run(topology: Topology, checks: Sequence[str] | None = None) -> list[str]:
    """The checks a run performs: those asked for, else those the topology lists.

    Raises :class:`TopologyError` when a check that ties identifiers to sensitive values is asked for
    on a table that declares no identifier.
    """
    names = list(checks) if checks else [config.name for config in topology.checks]
    needing = [name for name in names if name in IDENTIFIER_CHECKS]
    if needing and not topology.table.identifiers:
        raise TopologyError(
            f"the {' and '.join(needing)} check(s) need at least one identifier attribute",
            file=topology.path,
            key="table.identifiers",
        )
    return names


def needs_table(topology: Topology, checks: Sequence[str]) -> bool:
    """Whether the run reads the private table: publisher-side checks, or k-anonymity checked
    conservatively because of effective functional dependencies."""
    if TABLE_CHECKS & set(checks):
        return True
    return "k-anonymity" in checks and k_anonymity_needs_table(topology)


ProgressFactory = Callable[[str, int], Callable[[int, int], None]]


@dataclass(frozen=True)
class CheckSummary:
    """What one check examined: its threshold, how many channels and (channel, E, S) tasks."""

    name: str
    k: int
    channels: int
    tasks: int
    findings: int


@dataclass(frozen=True)
class Report:
    """The findings of a run, typed, with the summary of each check.

    ``exit_code`` is what the CLI returns: 0 when nothing is found, 1 when something is.
    """

    topology: str
    checks: tuple[CheckSummary, ...]
    findings: tuple[Finding, ...]

    @property
    def exit_code(self) -> int:
        return self.exit_code_for("any")

    def exit_code_for(self, fail_on: FailOn) -> int:
        """1 when a finding gates the run: any finding, or (``fail_on="certain"``) a certain one; else 0."""
        gating = self.findings if fail_on == "any" else [f for f in self.findings if f.certain]
        return 1 if gating else 0

    @property
    def certain_count(self) -> int:
        """Findings that hold in every instance that yields the views; the rest are possible."""
        return sum(1 for finding in self.findings if finding.certain)

    def by_level(self) -> dict[int, int]:
        """Number of linkage findings per minimal level."""
        levels: dict[int, int] = {}
        for finding in self.findings:
            if isinstance(finding, LinkageFinding):
                levels[finding.level] = levels.get(finding.level, 0) + 1
        return dict(sorted(levels.items()))

    def by_check(self) -> dict[str, int]:
        """Number of findings per check."""
        counts = {summary.name: 0 for summary in self.checks}
        for finding in self.findings:
            counts[finding.check] = counts.get(finding.check, 0) + 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        """The JSON document of docs/report-format.md."""
        return {
            "topology": self.topology,
            "checks": [summary.__dict__ for summary in self.checks],
            "summary": {
                "findings": len(self.findings),
                "certain": self.certain_count,
                "possible": len(self.findings) - self.certain_count,
                "by_check": self.by_check(),
                "by_level": {str(level): count for level, count in self.by_level().items()},
            },
            "findings": [finding.to_dict() for finding in self.findings],
        }

    def to_json(self, indent: int | None = None) -> str:
        """One JSON object (docs/report-format.md)."""
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)


def run_checks(
    topology: Topology,
    views: Mapping[str, pl.DataFrame],
    *,
    table: pl.DataFrame | None = None,
    checks: Sequence[str] | None = None,
    k: int | None = None,
    max_level: int | None = None,
    progress: ProgressFactory | None = None,
) -> Report:
    """Run ``checks`` (default: those the topology lists) over the views' rows.

    ``table`` is the private table's rows, needed by the publisher-side checks (``sind``).
    ``k`` overrides every check's threshold; ``progress(name, total)`` returns a callback
    ``(done, total)`` for a progress bar.
    """
    names = checks_to_run(topology, checks)
    unknown = [name for name in names if name not in CHECKS]
    if unknown:
        raise ValueError(f"unknown check(s) {', '.join(unknown)}; this version runs {', '.join(CHECKS)}")
    summaries: list[CheckSummary] = []
    findings: list[Finding] = []
    for name in names:
        if name == "linkage":
            check = LinkageCheck.from_topology(topology, k=k, max_level=max_level)
            total = sum(1 for view in views for task in check.tasks if view in task.channel.views)
            callback = progress(name, total) if progress is not None else None
            found: list[Finding] = list(run_linkage(check, views, callback))
            channels = sum(len(level) for level in check.levels)
            summaries.append(CheckSummary(name, check.k, channels, len(check.tasks), len(found)))
        elif name in TABLE_CHECKS:
            if table is None:
                raise TopologyError(
                    f"the {name} check needs the private table's rows", file=topology.path, key="table.source"
                )
            publisher = (
                SindCheck.from_topology(topology, k=k) if name == "sind" else RsindCheck.from_topology(topology, k=k)
            )
            found = list(publisher.update(publisher.initialize(), table).raised)
            summaries.append(
                CheckSummary(name, publisher.k, len(publisher.views), len(publisher.sensitive), len(found))
            )
        else:
            callback = progress(name, len(views)) if progress is not None else None
            found = list(_k_anonymity(topology, views, table, k, callback))
            pairs = sum(1 for e in topology.table.identifiers for s in topology.table.sensitive)
            threshold = found[0].k if found else _threshold(topology, "k-anonymity", k)
            summaries.append(CheckSummary(name, threshold, 1, pairs, len(found)))
        findings.extend(found)
    return Report(topology.name, tuple(summaries), tuple(findings))


def _threshold(topology: Topology, name: str, k: int | None) -> int:
    config = topology.check_config(name)
    return k if k is not None else (config.k if config is not None else 2)


CoverKey = tuple[str, Any, str, frozenset[Any]]


def _cover_key(finding: AssociationCoverFinding) -> CoverKey:
    return (
        finding.identifier_attribute,
        finding.identifier_value,
        finding.sensitive_attribute,
        frozenset(finding.sensitive_values),
    )


def _k_anonymity(
    topology: Topology,
    views: Mapping[str, pl.DataFrame],
    table: pl.DataFrame | None,
    k: int | None,
    progress: Callable[[int, int], None] | None,
) -> list[AssociationCoverFinding]:
    """Yao et al.'s k-anonymity by the method the subcase calls for (:mod:`streamdetect.checks.k_anonymity`),
    each cover naming a minimal set of views that forces it (:mod:`streamdetect.checks.forcing_views`)."""
    found = _covers(topology, views, table, k, progress)
    if not found:
        return found

    def finds(subset: frozenset[str], wanted: Collection[CoverKey]) -> set[CoverKey]:
        # Only the attributes the wanted covers concern: a run per (identifier, sensitive) pair is the cost.
        table_schema = replace(
            topology.table,
            identifiers=tuple(a for a in topology.table.identifiers if any(key[0] == a for key in wanted)),
            sensitive=tuple(a for a in topology.table.sensitive if any(key[2] == a for key in wanted)),
        )
        restricted = replace(
            topology, table=table_schema, views=tuple(view for view in topology.views if view.name in subset)
        )
        frames = {name: frame for name, frame in views.items() if name in subset}
        if table is None and needs_table(restricted, ["k-anonymity"]):
            return set()  # that subset's method reads the private table, which this run does not have
        return {_cover_key(finding) for finding in _covers(restricted, frames, table, k, None)}

    def releases(key: CoverKey) -> tuple[list[str], list[str]]:
        return tuple(  # type: ignore[return-value]
            [view.name for view in topology.views if attribute in view.attributes] for attribute in (key[0], key[2])
        )

    order = [view.name for view in topology.views]
    monotone = {_cover_key(finding): finding.exact for finding in found}
    hints = {_cover_key(finding): frozenset(finding.views) for finding in found}
    forcing = minimal_forcing_views(monotone, order, finds, releases=releases, monotone=monotone, hints=hints)
    return [replace(finding, views=tuple(sorted(forcing[_cover_key(finding)]))) for finding in found]


def _covers(
    topology: Topology,
    views: Mapping[str, pl.DataFrame],
    table: pl.DataFrame | None,
    k: int | None,
    progress: Callable[[int, int], None] | None,
) -> list[AssociationCoverFinding]:
    check = k_anonymity_check(topology, k)
    if isinstance(check, RecomputedCheck):
        if check.needs_table and table is None:
            raise TopologyError(
                "k-anonymity with effective functional dependencies is checked conservatively "
                "against the private table: set table.source",
                file=topology.path,
                key="table.source",
            )
        return list(check.update(check.initialize(), views, table).raised)
    return list(check.update(check.initialize(), views, progress).raised)
