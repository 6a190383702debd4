"""Run a topology's checks over its views' rows and gather a :class:`Report`. Pure: frames in, report out.

The batch ``check`` and the streaming worker share this code: both build the checks here and feed rows
through their ``update``; a batch run is one update with every row.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import polars as pl

from streamdetect.check_plan import CheckPlan, checks_to_run, plan_checks
from streamdetect.checks.findings import Finding
from streamdetect.checks.protocol import CheckSummary, ProgressFactory, Withholds
from streamdetect.checks.registry import CHECKS
from streamdetect.detector import Detector
from streamdetect.errors import StreamdetectError
from streamdetect.model.batch import Batch
from streamdetect.model.topology import Topology

__all__ = [
    "CHECKS",
    "CheckSummary",
    "FailOn",
    "Finding",
    "ProgressFactory",
    "Report",
    "Withdrawal",
    "checks_to_run",
    "needs_table",
    "run_checks",
]

#: What fails a run: any finding, or only certain ones (``check --fail-on``).
FailOn = Literal["any", "certain"]


def needs_table(topology: Topology, checks: Sequence[str]) -> bool:
    """Whether the run reads the private table: some check's properties say so (the publisher-side checks,
    k-anonymity checked conservatively because of effective functional dependencies). A run that plans
    its checks once reads :attr:`CheckPlan.needs_table` instead."""
    return plan_checks(topology, checks).needs_table


@dataclass(frozen=True)
class Withdrawal:
    """What withholding one view would do: findings it clears (gone without the view), certain ones among
    them, and findings left. ``error`` says why it could not be computed (then the counts are 0)."""

    view: str
    cleared: int
    certain_cleared: int
    remaining: int
    error: str | None = None


#: The exit code of a report with no finding that fails the run and a check incomplete.
EXIT_INCOMPLETE = 4


@dataclass(frozen=True)
class Report:
    """The findings of a run, typed, with the summary of each check.

    ``exit_code`` is what the CLI returns: 0 when nothing is found, 1 when something is, 4 when nothing is
    and a check is incomplete. ``accepted``: ids of findings accepted by a baseline (they do not fail the
    run); ``impact``: per view, what withholding it would clear (``check --impact``), most cleared first;
    ``incomplete``: per check that could not see an input it needs (a worker's, as ``findings`` reads it),
    why: its findings may be fewer than there are.
    """

    topology: str
    checks: tuple[CheckSummary, ...]
    findings: tuple[Finding, ...]
    accepted: frozenset[str] = frozenset()
    impact: tuple[Withdrawal, ...] | None = None
    incomplete: Mapping[str, str] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return self.exit_code_for("any")

    def gating(self, fail_on: FailOn = "any") -> list[Finding]:
        """The findings that fail the run: not accepted by the baseline, and certain under ``"certain"``."""
        return [f for f in self.findings if f.id not in self.accepted and (fail_on == "any" or f.certain)]

    def exit_code_for(self, fail_on: FailOn) -> int:
        """1 when a finding gates the run (:meth:`gating`), else 4 when a check is incomplete (its silence
        is not clean), else 0."""
        if self.gating(fail_on):
            return 1
        return EXIT_INCOMPLETE if self.incomplete else 0

    @property
    def certain_count(self) -> int:
        """Findings that hold in every instance that yields the views; the rest are possible."""
        return sum(1 for finding in self.findings if finding.certain)

    def by_level(self) -> dict[int, int]:
        """Number of findings per minimal closure level, for the findings that have one (linkage's)."""
        levels: dict[int, int] = {}
        for finding in self.findings:
            level = finding.closure_level
            if level is not None:
                levels[level] = levels.get(level, 0) + 1
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
            **({"incomplete": dict(self.incomplete)} if self.incomplete else {}),
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
    plan: CheckPlan | None = None,
) -> Report:
    """Run ``checks`` (default: those the topology lists) over the views' rows.

    ``table`` is the private table's rows, needed by the publisher-side checks (``sind``).
    ``k`` overrides every check's threshold; ``progress(name, total)`` returns a callback
    ``(done, total)`` for a progress bar. ``impact``: also compute, per view, the findings that
    withholding it would clear, exactly (the linkage check reuses its state: the channels without the
    view are the closure of the others; the other checks are rerun without it). ``plan``: the checks
    planned already (:func:`~streamdetect.check_plan.plan_checks`), else planned here from ``checks``,
    ``k`` and ``max_level``.
    """
    detector = Detector(topology, checks, k=k, max_level=max_level, plan=plan)
    refusal = detector.plan.table_refusal() if table is None else None
    if refusal is not None:
        raise refusal
    # From empty states, one update raises every finding of the result, in report order.
    deltas = detector.update_each(Batch(views=views, table=table), progress)
    findings: list[Finding] = [f for delta in deltas.values() for f in delta.raised]
    summaries = detector.summaries({name: len(delta.raised) for name, delta in deltas.items()})
    withdrawals = _impact(detector, topology, views, table, k, max_level, findings) if impact else None
    return Report(topology.name, tuple(summaries), tuple(findings), impact=withdrawals)


def _impact(  # noqa: PLR0917 -- private helper of run_checks, which passes its context
    detector: Detector,
    topology: Topology,
    views: Mapping[str, pl.DataFrame],
    table: pl.DataFrame | None,
    k: int | None,
    max_level: int | None,
    findings: Sequence[Finding],
) -> tuple[Withdrawal, ...]:
    """Per view, what withholding it clears: a check that can tell from its state
    (:class:`~streamdetect.checks.protocol.Withholds`) tells, the others are rerun without the view."""
    left: dict[str, set[tuple[Any, ...]]] = {view.name: set() for view in topology.views}
    errors: dict[str, str] = {}
    for name, check in detector.checks.items():
        if isinstance(check, Withholds):
            for view in left:
                without = check.result_without(detector.states[name], frozenset({view}))
                left[view] |= {f.subject for f in without}
        elif any(f.check == name for f in findings):
            _rerun_without_each_view(topology, views, table, name, k, max_level, left, errors)
    return _withdrawals(findings, left, errors)


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
