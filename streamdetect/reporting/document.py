"""A report laid out for people: blocks of rows per check and channel, a legend, what to withhold.

Each check lays out its own section (its registration's ``section``: :mod:`streamdetect.checks.presentation`).
One layout, several renderings (a terminal's rich tables, plain text for pipes and files, Markdown for a
merge-request comment): :func:`layout` decides what is shown; the renderers only draw it. Large finding
sets are summarised: each block shows its count and its first ``limit`` rows; ``--json`` has them all.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamdetect.checks.canonical import value_text
from streamdetect.checks.presentation import Block, Section, Shown
from streamdetect.checks.registry import REGISTRY
from streamdetect.engine import FailOn, Report

__all__ = ["LEGEND", "Block", "Layout", "Section", "layout", "value_text"]

LEGEND = (
    "level: how many views are joined; channel: the views whose join discloses it; certain: holds in every "
    "table the views could come from; possible: a join of views with different selections shows it and "
    "nothing proves it (never a total disclosure)."
)


@dataclass(frozen=True)
class Layout:
    """A whole human report."""

    topology: str
    sections: tuple[Section, ...]
    legend: str
    withhold: Block | None
    summary: str
    failed: bool


def layout(report: Report, limit: int = 20, fail_on: FailOn = "any") -> Layout:
    """What a person reads: per check its findings by channel (certain before possible), at most
    ``limit`` rows per block, the legend, what to withhold (when computed) and the verdict. O(findings)."""
    shown = Shown(
        {finding.id: number for number, finding in enumerate(report.findings, start=1)}, report.accepted, limit
    )
    sections = []
    for summary in report.checks:
        findings = [f for f in report.findings if f.check == summary.name]
        sections.append(REGISTRY[summary.name].render(summary, findings, shown))
    return Layout(
        topology=report.topology,
        sections=tuple(sections),
        legend=LEGEND,
        withhold=_withhold(report),
        summary=_summary(report, fail_on),
        failed=bool(report.gating(fail_on)),
    )


def _withhold(report: Report) -> Block | None:
    if report.impact is None:
        return None
    rows = tuple(
        (w.view, w.error, "", "") if w.error else (w.view, str(w.cleared), str(w.certain_cleared), str(w.remaining))
        for w in report.impact
    )
    return Block(
        "what to withhold: findings each view's withdrawal would clear (rerun without it)",
        ("view", "findings cleared", "certain among them", "findings left"),
        rows,
    )


def _summary(report: Report, fail_on: FailOn) -> str:
    blind = ""
    if report.incomplete:
        reasons = "; ".join(f"{name}: {why}" for name, why in report.incomplete.items())
        blind = f"; INCOMPLETE, findings may be missing ({reasons})"
    if not report.findings:
        found = "no disclosure found" if report.incomplete else "no disclosure"
        return f"{found} in topology {report.topology!r}{blind}; exit code {report.exit_code_for(fail_on)}"
    certain = report.certain_count
    parts = [f"{name}: {count}" for name, count in report.by_check().items()]
    accepted = sum(1 for f in report.findings if f.id in report.accepted)
    baseline = f"; {accepted} accepted by the baseline" if accepted else ""
    gate = " (failing on certain findings only)" if fail_on == "certain" else ""
    return (
        f"{len(report.findings)} disclosure(s), {certain} certain and {len(report.findings) - certain} possible "
        f"({'; '.join(parts)}){baseline} in topology {report.topology!r}{blind}; exit code "
        f"{report.exit_code_for(fail_on)}{gate}"
    )
