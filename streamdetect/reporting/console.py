"""Human output of a report: one rich table per check, findings grouped by channel, a summary line."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from streamdetect.checks.findings import AssociationCoverFinding, LinkageFinding, SindFinding, json_scalar
from streamdetect.engine import CheckSummary, FailOn, Report


def _value(value: object) -> str:
    return str(json_scalar(value))  # type: ignore[arg-type]


def render_report(console: Console, report: Report, limit: int = 20, fail_on: FailOn = "any") -> None:
    """Print the findings grouped by check and minimal channel, at most ``limit`` rows per channel.

    ``#`` is the finding's number for ``streamdetect explain --finding N`` (its position in the report).
    """
    numbers = {finding.id: number for number, finding in enumerate(report.findings, start=1)}
    for summary in report.checks:
        if summary.name in ("sind", "rsind"):
            classes = [f for f in report.findings if isinstance(f, SindFinding) and f.check == summary.name]
            _render_sind(console, summary, classes, limit, numbers)
            continue
        if summary.name == "k-anonymity":
            covers = [f for f in report.findings if isinstance(f, AssociationCoverFinding)]
            _render_covers(console, summary, covers, limit, numbers)
            continue
        console.print(
            f"[bold]{summary.name}[/bold] (k = {summary.k}): {summary.channels} channels, "
            f"{summary.tasks} (channel, identifier, sensitive) combinations examined"
        )
        groups: dict[tuple[bool, tuple[str, ...]], list[LinkageFinding]] = defaultdict(list)
        for finding in report.findings:
            if isinstance(finding, LinkageFinding):
                groups[(not finding.certain, finding.views)].append(finding)
        for possible, views in sorted(groups, key=lambda g: (g[0], len(g[1]), g[1])):
            members = groups[(possible, views)]
            title = f"channel {{{', '.join(views)}}}, level {len(views)}"
            if possible:
                title += (
                    " [yellow]possible links: views with different selections may link rows no table links[/yellow]"
                )
            else:
                title += ": certain"
            table = Table(title=title, title_justify="left", show_lines=False)
            table.add_column("#", justify="right")
            table.add_column("identifier")
            table.add_column("value")
            table.add_column("sensitive")
            table.add_column("linked values")
            table.add_column("disclosure")
            table.add_column("other channels at this level")
            for finding in members[:limit]:
                others = len(finding.channels) - 1
                table.add_row(
                    str(numbers[finding.id]),
                    finding.identifier_attribute,
                    _value(finding.identifier_value),
                    finding.sensitive_attribute,
                    ", ".join(_value(v) for v in finding.sensitive_values),
                    "possible" if not finding.certain else ("total" if finding.total else "partial"),
                    str(others) if others else "",
                )
            console.print(table)
            _more(console, len(members), limit, " in this channel")
    parts = [f"{name}: {count}" for name, count in report.by_check().items()]
    levels = ", ".join(f"{count} at level {level}" for level, count in report.by_level().items())
    if levels:
        parts[list(report.by_check()).index("linkage")] += f" ({levels})"
    if report.findings:
        certain = report.certain_count
        console.print(
            f"[bold red]{len(report.findings)} disclosure(s)[/bold red], {certain} certain and "
            f"{len(report.findings) - certain} possible ({'; '.join(parts)}) in topology "
            f"{report.topology!r}; exit code {report.exit_code_for(fail_on)}"
        )
    else:
        console.print(f"[bold green]no disclosure[/bold green] in topology {report.topology!r}; exit code 0")


def _more(console: Console, total: int, limit: int, where: str = "") -> None:
    """Say how many findings the table left out."""
    if total > limit:
        console.print(f"  ... and {total - limit} more{where} (--limit, or --json for all)")


def _render_covers(
    console: Console,
    summary: CheckSummary,
    findings: list[AssociationCoverFinding],
    limit: int,
    numbers: Mapping[str, int],
) -> None:
    console.print(
        f"[bold]k-anonymity[/bold] (k = {summary.k}): minimal association covers smaller than k over the "
        f"join of all views, {summary.tasks} identifier/sensitive pair(s)"
    )
    if not findings:
        return
    table = Table(title="association covers (every instance pairs the value with one of these)", title_justify="left")
    for column in ("#", "identifier", "value", "sensitive", "cover", "views", "exact"):
        table.add_column(column)
    for finding in findings[:limit]:
        table.add_row(
            str(numbers[finding.id]),
            finding.identifier_attribute,
            _value(finding.identifier_value),
            finding.sensitive_attribute,
            "{" + ", ".join(_value(v) for v in finding.sensitive_values) + "}",
            ", ".join(finding.views),
            "yes" if finding.exact else "no (conservative)",
        )
    console.print(table)
    _more(console, len(findings), limit)


def _render_sind(
    console: Console, summary: CheckSummary, findings: list[SindFinding], limit: int, numbers: Mapping[str, int]
) -> None:
    console.print(
        f"[bold]{summary.name}[/bold] (k = {summary.k}): classes of indistinguishable public tuples, "
        f"{summary.tasks} sensitive attribute(s)"
    )
    if not findings:
        return
    table = Table(title="classes that do not protect their members", title_justify="left")
    for column in ("#", "sensitive", "members", "why", "exact"):
        table.add_column(column)
    for finding in findings[:limit]:
        shown = [", ".join(f"{name}={_value(value)}" for name, value in member) for member in finding.members[:3]]
        more = f" (+{len(finding.members) - 3} more)" if len(finding.members) > 3 else ""
        table.add_row(
            str(numbers[finding.id]),
            finding.sensitive_attribute,
            "; ".join(shown) + more,
            finding.reason,
            "yes" if finding.exact else "no (conservative)",
        )
    console.print(table)
    _more(console, len(findings), limit)


@contextmanager
def progress_bars(console: Console) -> Iterator[Callable[[str, int], Callable[[int, int], None]]]:
    """A progress factory for :func:`streamdetect.engine.run_checks`, drawn only on a terminal."""
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )

    def factory(name: str, total: int) -> Callable[[int, int], None]:
        task = progress.add_task(f"{name}: channel joins", total=total)

        def advance(done: int, _total: int) -> None:
            progress.update(task, completed=done)

        return advance

    with progress:
        yield factory
