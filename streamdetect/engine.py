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

from streamdetect.checks.association_covers import AssociationCoverCheck, CoverCodes
from streamdetect.checks.findings import AssociationCoverFinding, LinkageFinding, RsindFinding, SindFinding
from streamdetect.checks.forcing_views import minimal_forcing_views
from streamdetect.checks.indistinguishability import SindCheck
from streamdetect.checks.k_anonymity import k_anonymity_check
from streamdetect.checks.k_anonymity import needs_table as k_anonymity_needs_table
from streamdetect.checks.linkage import LinkageCheck, finding_order
from streamdetect.checks.recomputed import RecomputedCheck
from streamdetect.checks.restricted_indistinguishability import RsindCheck
from streamdetect.checks.seen_rows import SeenRows
from streamdetect.errors import StreamdetectError, TopologyError
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
class Withdrawal:
    """What withholding one view would do: findings it clears (gone without the view), certain ones among
    them, and findings left. ``error`` says why it could not be computed (then the counts are 0)."""

    view: str
    cleared: int
    certain_cleared: int
    remaining: int
    error: str | None = None


@dataclass(frozen=True)
class Report:
    """The findings of a run, typed, with the summary of each check.

    ``exit_code`` is what the CLI returns: 0 when nothing is found, 1 when something is.
    ``accepted``: ids of findings accepted by a baseline (they do not fail the run); ``impact``: per view,
    what withholding it would clear (``check --impact``), most cleared first.
    """

    topology: str
    checks: tuple[CheckSummary, ...]
    findings: tuple[Finding, ...]
    accepted: frozenset[str] = frozenset()
    impact: tuple[Withdrawal, ...] | None = None

    @property
    def exit_code(self) -> int:
        return self.exit_code_for("any")

    def gating(self, fail_on: FailOn = "any") -> list[Finding]:
        """The findings that fail the run: not accepted by the baseline, and certain under ``"certain"``."""
        return [f for f in self.findings if f.id not in self.accepted and (fail_on == "any" or f.certain)]

    def exit_code_for(self, fail_on: FailOn) -> int:
        """1 when a finding gates the run (:meth:`gating`), else 0."""
        return 1 if self.gating(fail_on) else 0

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
                **({"accepted": sum(1 for f in self.findings if f.id in self.accepted)} if self.accepted else {}),
                "by_check": self.by_check(),
                "by_level": {str(level): count for level, count in self.by_level().items()},
            },
            "findings": [finding.to_dict() for finding in self.findings],
            **({"impact": [withdrawal.__dict__ for withdrawal in self.impact]} if self.impact is not None else {}),
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
    impact: bool = False,
) -> Report:
    """Run ``checks`` (default: those the topology lists) over the views' rows.

    ``table`` is the private table's rows, needed by the publisher-side checks (``sind``).
    ``k`` overrides every check's threshold; ``progress(name, total)`` returns a callback
    ``(done, total)`` for a progress bar. ``impact``: also compute, per view, the findings that
    withholding it would clear, exactly (the linkage check reuses its state: the channels without the
    view are the closure of the others; the other checks are rerun without it).
    """
    names = checks_to_run(topology, checks)
    unknown = [name for name in names if name not in CHECKS]
    if unknown:
        raise ValueError(f"unknown check(s) {', '.join(unknown)}; this version runs {', '.join(CHECKS)}")
    summaries: list[CheckSummary] = []
    findings: list[Finding] = []
    left: dict[str, set[tuple[Any, ...]]] = {view.name: set() for view in topology.views}
    errors: dict[str, str] = {}
    for name in names:
        if name == "linkage":
            check = LinkageCheck.from_topology(topology, k=k, max_level=max_level)
            total = sum(1 for view in views for task in check.tasks if view in task.channel.views)
            callback = progress(name, total) if progress is not None else None
            state = check.initialize()
            linked = sorted(check.update(state, views, callback).raised, key=finding_order)
            found: list[Finding] = list(linked)
            channels = sum(len(level) for level in check.levels)
            summaries.append(CheckSummary(name, check.k, channels, len(check.tasks), len(found)))
            if impact:
                for view in left:
                    left[view] |= {f.subject for f in check.result(state, without=frozenset({view}))}
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
        if impact and name != "linkage" and found:
            _rerun_without_each_view(topology, views, table, name, k, max_level, left, errors)
        findings.extend(found)
    withdrawals = _withdrawals(findings, left, errors) if impact else None
    return Report(topology.name, tuple(summaries), tuple(findings), impact=withdrawals)


def _rerun_without_each_view(  # noqa: PLR0917 -- private helper of run_checks, which passes its context
    topology: Topology,
    views: Mapping[str, pl.DataFrame],
    table: pl.DataFrame | None,
    name: str,
    k: int | None,
    max_level: int | None,
    left: dict[str, set[tuple[Any, ...]]],
    errors: dict[str, str],
) -> None:
    """Add to ``left[view]`` what check ``name`` still finds without ``view`` (``errors`` when it cannot run)."""
    for view in list(left):
        rest = replace(topology, views=tuple(v for v in topology.views if v.name != view))
        if not rest.views:
            continue
        frames = {other: frame for other, frame in views.items() if other != view}
        try:
            report = run_checks(rest, frames, table=table, checks=[name], k=k, max_level=max_level)
        except StreamdetectError as error:
            errors[view] = f"{name} could not run without it: {error}"
            continue
        left[view] |= {f.subject for f in report.findings}


def _withdrawals(
    findings: Sequence[Finding], left: Mapping[str, set[tuple[Any, ...]]], errors: Mapping[str, str]
) -> tuple[Withdrawal, ...]:
    """Per view, the findings absent once it is withheld; most cleared first, then by name."""
    result = []
    for view, remaining in left.items():
        cleared = [f for f in findings if f.subject not in remaining]
        if view in errors:
            result.append(Withdrawal(view, 0, 0, len(findings), errors[view]))
            continue
        result.append(
            Withdrawal(view, len(cleared), sum(1 for f in cleared if f.certain), len(findings) - len(cleared))
        )
    return tuple(sorted(result, key=lambda w: (-w.cleared, -w.certain_cleared, w.view)))


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
    check = k_anonymity_check(topology, k)
    if isinstance(check, AssociationCoverCheck):
        return _projection_covers(topology, check, views, k, progress)
    found = _covers(topology, views, table, k, progress)
    if not found:
        return found

    def finds(subset: frozenset[str], wanted: Collection[CoverKey]) -> set[CoverKey]:
        restricted = _restricted(topology, subset, {(key[0], key[2]) for key in wanted})
        frames = {name: frame for name, frame in views.items() if name in subset}
        if table is None and needs_table(restricted, ["k-anonymity"]):
            return set()  # that subset's method reads the private table, which this run does not have
        return {_cover_key(finding) for finding in _covers(restricted, frames, table, k, None)}

    def releases(key: CoverKey) -> tuple[list[str], list[str]]:
        return _releasing(topology, key[0], key[2])

    monotone = {_cover_key(finding): finding.exact for finding in found}
    hints = {_cover_key(finding): frozenset(finding.views) for finding in found}
    order = [view.name for view in topology.views]
    forcing = minimal_forcing_views(monotone, order, finds, releases=releases, monotone=monotone, hints=hints)
    return [replace(finding, views=tuple(sorted(forcing[_cover_key(finding)]))) for finding in found]


def _restricted(topology: Topology, subset: frozenset[str], pairs: set[tuple[str, str]]) -> Topology:
    """The topology with only the views of ``subset`` and the (identifier, sensitive) attributes of ``pairs``
    (a rerun per pair is the cost, so only the pairs still asked about)."""
    table = replace(
        topology.table,
        identifiers=tuple(a for a in topology.table.identifiers if any(e == a for e, _ in pairs)),
        sensitive=tuple(a for a in topology.table.sensitive if any(s == a for _, s in pairs)),
    )
    return replace(topology, table=table, views=tuple(view for view in topology.views if view.name in subset))


def _releasing(topology: Topology, identifier: str, sensitive: str) -> tuple[list[str], list[str]]:
    """The views that release the identifier attribute, and those that release the sensitive one."""
    return (
        [view.name for view in topology.views if identifier in view.attributes],
        [view.name for view in topology.views if sensitive in view.attributes],
    )


def _projection_covers(
    topology: Topology,
    check: AssociationCoverCheck,
    views: Mapping[str, pl.DataFrame],
    k: int | None,
    progress: Callable[[int, int], None] | None,
) -> list[AssociationCoverFinding]:
    """The join-based method's covers with minimal forcing views, compared in dictionary codes: every
    subset run reuses the rows the full run encoded and decodes nothing."""
    state = check.initialize()
    check.add(state, views, progress)
    full = check.minimal_cover_codes(state)
    if not full:
        return []

    def finds(subset: frozenset[str], wanted: Collection[CoverCodes]) -> set[CoverCodes]:
        restricted = _restricted(topology, subset, {(key[0], key[1]) for key in wanted})
        narrower = k_anonymity_check(restricted, k)
        if not isinstance(narrower, AssociationCoverCheck):
            return set()  # not the same method on fewer views (an FD became effective): not tried
        seen = SeenRows({name: state.seen.rows[name] for name in subset}, state.seen.dictionaries)
        return set(narrower.minimal_cover_codes(narrower.recompute(seen)))

    def releases(key: CoverCodes) -> tuple[list[str], list[str]]:
        return _releasing(topology, key[0], key[1])

    order = [view.name for view in topology.views]
    hints = {key: frozenset(holders) for key, holders in full.items()}
    forcing = minimal_forcing_views(full, order, finds, releases=releases, hints=hints)
    return check.result(state, covers=full, views=forcing)


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
