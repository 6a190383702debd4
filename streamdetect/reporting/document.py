"""A report laid out for people: blocks of rows per check and channel, a legend, what to withhold.

One layout, several renderings (a terminal's rich tables, plain text for pipes and files, Markdown for a
merge-request comment): :func:`layout` decides what is shown; the renderers only draw it. Large finding
sets are summarised: each block shows its count and its first ``limit`` rows; ``--json`` has them all.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from streamdetect.checks.findings import AssociationCoverFinding, GroupFinding, LinkageFinding, SindFinding, json_scalar
from streamdetect.engine import FailOn, Finding, Report

LEGEND = (
    "level: how many views are joined; channel: the views whose join discloses it; certain: holds in every "
    "table the views could come from; possible: a join of views with different selections shows it and "
    "nothing proves it (never a total disclosure)."
)
#: Members of a SIND class shown in a row before "+N more".
MEMBERS_SHOWN = 3


@dataclass(frozen=True)
class Block:
    """One table: a title, its columns, the rows shown and how many were left out."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    omitted: int = 0
    warning: bool = False


@dataclass(frozen=True)
class Section:
    """One check: a heading line and its blocks."""

    heading: str
    blocks: tuple[Block, ...]


@dataclass(frozen=True)
class Layout:
    """A whole human report."""

    topology: str
    sections: tuple[Section, ...]
    legend: str
    withhold: Block | None
    summary: str
    failed: bool


def value_text(value: object) -> str:
    """A value as the report prints it (dates ISO 8601)."""
    return str(json_scalar(value))  # type: ignore[arg-type]


def _values(values: Sequence[object]) -> str:
    return ", ".join(value_text(v) for v in values)


def layout(report: Report, limit: int = 20, fail_on: FailOn = "any") -> Layout:
    """What a person reads: per check its findings by channel (certain before possible), at most
    ``limit`` rows per block, the legend, what to withhold (when computed) and the verdict. O(findings)."""
    numbers = {finding.id: number for number, finding in enumerate(report.findings, start=1)}
    sections = []
    for summary in report.checks:
        findings = [f for f in report.findings if f.check == summary.name]
        if summary.name == "linkage":
            heading = (
                f"linkage (k = {summary.k}): {summary.channels} channels, "
                f"{summary.tasks} (channel, identifier, sensitive) combinations examined"
            )
            blocks = _linkage_blocks([f for f in findings if isinstance(f, LinkageFinding)], numbers, report, limit)
        elif summary.name == "k-anonymity":
            heading = (
                f"k-anonymity (k = {summary.k}): minimal association covers smaller than k, "
                f"{summary.tasks} identifier/sensitive pair(s)"
            )
            covers = [f for f in findings if isinstance(f, AssociationCoverFinding)]
            blocks = _cover_blocks(covers, numbers, report, limit)
        elif summary.name in ("table-k-anonymity", "l-diversity"):
            diverse = summary.name == "l-diversity"
            heading = (
                f"{summary.name} ({'l' if diverse else 'k'} = {summary.k}): groups of equal quasi-identifier values "
                f"{'with fewer distinct sensitive values than l' if diverse else 'smaller than k'}, "
                f"{summary.channels} relation(s) examined"
            )
            blocks = _group_blocks([f for f in findings if isinstance(f, GroupFinding)], numbers, report, limit)
        else:
            heading = (
                f"{summary.name} (k = {summary.k}): classes of indistinguishable public tuples, "
                f"{summary.tasks} sensitive attribute(s)"
            )
            blocks = _sind_blocks([f for f in findings if isinstance(f, SindFinding)], numbers, report, limit)
        sections.append(Section(heading, tuple(blocks)))
    return Layout(
        topology=report.topology,
        sections=tuple(sections),
        legend=LEGEND,
        withhold=_withhold(report),
        summary=_summary(report, fail_on),
        failed=bool(report.gating(fail_on)),
    )


def _marks(finding: Finding, report: Report) -> str:
    return " (accepted)" if finding.id in report.accepted else ""


def _association_cells(
    finding: LinkageFinding | AssociationCoverFinding, number: int, report: Report
) -> tuple[str, ...]:
    """The cells an identifier-to-sensitive finding starts its row with: #, id, E, e, S."""
    return (
        str(number),
        finding.id + _marks(finding, report),
        finding.identifier_attribute,
        value_text(finding.identifier_value),
        finding.sensitive_attribute,
    )


def _cut(rows: Sequence[tuple[str, ...]], limit: int) -> tuple[tuple[tuple[str, ...], ...], int]:
    return tuple(rows[:limit]), max(0, len(rows) - limit)


def _linkage_blocks(findings: list[LinkageFinding], numbers: dict[str, int], report: Report, limit: int) -> list[Block]:
    groups: dict[tuple[bool, tuple[str, ...]], list[LinkageFinding]] = defaultdict(list)
    for finding in findings:
        groups[(not finding.certain, finding.views)].append(finding)
    blocks = []
    columns = ("#", "id", "identifier", "value", "sensitive", "linked values", "disclosure", "other channels")
    for possible, views in sorted(groups, key=lambda g: (g[0], len(g[1]), g[1])):
        members = groups[(possible, views)]
        joined = ", ".join(members[0].joined_on) or "nothing (one view)"
        kind = "possible links" if possible else "certain"
        title = (
            f"{kind}: channel {{{', '.join(views)}}}, level {len(views)}, joined on {joined}: {len(members)} finding(s)"
        )
        rows = [
            (
                *_association_cells(f, numbers[f.id], report),
                _values(f.sensitive_values),
                "possible" if not f.certain else ("total" if f.total else "partial"),
                str(len(f.channels) - 1) if len(f.channels) > 1 else "",
            )
            for f in members
        ]
        shown, omitted = _cut(rows, limit)
        blocks.append(Block(title, columns, shown, omitted, warning=possible))
    return blocks


def _cover_blocks(
    findings: list[AssociationCoverFinding], numbers: dict[str, int], report: Report, limit: int
) -> list[Block]:
    if not findings:
        return []
    columns = ("#", "id", "identifier", "value", "sensitive", "cover", "forced by views", "exact")
    rows = [
        (
            *_association_cells(f, numbers[f.id], report),
            "{" + _values(f.sensitive_values) + "}",
            ", ".join(f.views),
            "yes" if f.exact else "no (conservative)",
        )
        for f in findings
    ]
    shown, omitted = _cut(rows, limit)
    title = f"association covers (every instance pairs the value with one of these): {len(findings)} finding(s)"
    return [Block(title, columns, shown, omitted)]


def _sind_blocks(findings: list[SindFinding], numbers: dict[str, int], report: Report, limit: int) -> list[Block]:
    if not findings:
        return []
    columns = ("#", "id", "sensitive", "members", "why", "exact")
    rows = []
    for f in findings:
        shown_members = [
            ", ".join(f"{name}={value_text(value)}" for name, value in member) for member in f.members[:MEMBERS_SHOWN]
        ]
        more = f" (+{len(f.members) - MEMBERS_SHOWN} more)" if len(f.members) > MEMBERS_SHOWN else ""
        rows.append(
            (
                str(numbers[f.id]),
                f.id + _marks(f, report),
                f.sensitive_attribute,
                "; ".join(shown_members) + more,
                f.reason,
                "yes" if f.exact else "no (conservative)",
            )
        )
    shown, omitted = _cut(rows, limit)
    return [Block(f"classes that do not protect their members: {len(findings)} finding(s)", columns, shown, omitted)]


def _group_blocks(findings: list[GroupFinding], numbers: dict[str, int], report: Report, limit: int) -> list[Block]:
    """One block per relation (the table, then each view) and sensitive attribute."""
    groups: dict[tuple[str | None, str | None], list[GroupFinding]] = defaultdict(list)
    for finding in findings:
        groups[(finding.relation, finding.sensitive_attribute)].append(finding)
    blocks = []
    for (relation, sensitive), members in groups.items():
        where = "the table" if relation is None else f"view {relation}"
        diverse = sensitive is not None
        columns = ("#", "id", "group", "rows", *((f"distinct {sensitive}",) if diverse else ()))
        rows = [
            (
                str(numbers[f.id]),
                f.id + _marks(f, report),
                ", ".join(f"{name}={value_text(value)}" for name, value in f.group),
                str(f.count),
                *((str(f.distinct),) if diverse else ()),
            )
            for f in members
        ]
        shown, omitted = _cut(rows, limit)
        what = (
            f"groups with fewer than {members[0].k} distinct {sensitive}"
            if diverse
            else f"groups of fewer than {members[0].k} rows"
        )
        blocks.append(Block(f"{where}: {what}: {len(members)} finding(s)", columns, shown, omitted))
    return blocks


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
