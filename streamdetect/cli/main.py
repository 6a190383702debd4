"""The ``streamdetect`` command: ``check``, ``explain``, ``closure``, ``findings``, ``bench``, ``broker``, ``publish``,
``worker``, ``anonymize``, ``dependencies``, ``fragment``, ``loose``, ``remediate``, ``import-views``,
``connect``, ``capture``.

Exit codes: 0 nothing found, 1 findings, 2 bad input (one message naming the file, the key path and
what is wrong, on stderr; never a traceback), 3 an internal error (a bug; ``STREAMDETECT_DEBUG=1``
shows its traceback).
"""

from __future__ import annotations

import gc
import io
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from streamdetect.checks.registry import CHECKS, REGISTRY
from streamdetect.cli.bench import bench
from streamdetect.cli.broker import broker
from streamdetect.cli.changes import capture, connect
from streamdetect.cli.database import import_views
from streamdetect.cli.errors import EXIT_CODES, fail_cleanly
from streamdetect.cli.remediation import anonymize, dependencies, fragment, loose, remediate
from streamdetect.cli.stream import BOOTSTRAP, publish, worker
from streamdetect.errors import TopologyError
from streamdetect.model.limits import MAX_K

if TYPE_CHECKING:
    import polars as pl
    from rich.table import Table

    from streamdetect.engine import FailOn, Finding, Report
    from streamdetect.model.topology import Topology
    from streamdetect.relational.closure import Channel
    from streamdetect.relational.universal import ChannelSize

# The commands import what they compute with in their bodies: `--help` and a bad option load none of it.


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_CODES)
@click.version_option(package_name="streamdetect")
def cli() -> None:
    """Detect privacy disclosure across the views of one private table."""


FORMATS = ("human", "json", "markdown", "junit")


@cli.command(epilog=EXIT_CODES)
@click.argument("topology", type=click.Path(path_type=Path))
@click.option(
    "--format",
    "output_format",
    type=click.Choice(FORMATS),
    default="human",
    show_default=True,
    help="human (tables on a terminal, plain text otherwise), json (docs/report-format.md), markdown "
    "(a merge-request comment) or junit (XML: each finding a failed test case).",
)
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option(
    "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write the report to this file, not stdout."
)
@click.option("--check", "checks", multiple=True, type=click.Choice(CHECKS), help="Run only this check (repeatable).")
@click.option("--k", type=click.IntRange(min=2, max=MAX_K), help="Override every check's threshold k.")
@click.option("--max-level", type=click.IntRange(min=1), help="Stop the closure at this many views per channel.")
@click.option("--limit", default=20, show_default=True, help="Findings shown per channel (human and markdown).")
@click.option(
    "--fail-on",
    type=click.Choice(["any", "certain"]),
    default="any",
    show_default=True,
    help="Exit 1 on any finding, or only on certain ones (possible links then exit 0).",
)
@click.option(
    "--baseline",
    type=click.Path(dir_okay=False, path_type=Path),
    help="An accepted earlier JSON report: its findings (by id) do not fail the run; only new ones do.",
)
@click.option("--impact", is_flag=True, help="Per view, the findings withholding it would clear (rerun without it).")
@fail_cleanly
def check(
    topology: Path,
    output_format: str,
    as_json: bool,
    output: Path | None,
    checks: tuple[str, ...],
    k: int | None,
    max_level: int | None,
    limit: int,
    fail_on: FailOn,
    baseline: Path | None,
    impact: bool,
) -> None:
    """Check TOPOLOGY's views: exit 0 when nothing fails the run, 1 when something does, 2 on bad input."""
    from rich.console import Console

    from streamdetect.check_plan import plan_checks
    from streamdetect.engine import run_checks
    from streamdetect.io.sources import load_data
    from streamdetect.io.topology_file import load_topology
    from streamdetect.reporting.baseline import accepted_ids
    from streamdetect.reporting.console import progress_bars

    model = load_topology(topology)
    plan = plan_checks(model, checks or None, k=k, max_level=max_level)
    accepted = accepted_ids(baseline) if baseline is not None else frozenset()
    err = Console(stderr=True)
    with progress_bars(err, "rows read") as reading:
        views, table = load_data(model, with_table=plan.needs_table, progress=reading)
    with progress_bars(err) as progress:
        report = run_checks(
            model, views, table=table, k=k, max_level=max_level, progress=progress, impact=impact, plan=plan
        )
    report = replace(report, accepted=accepted)
    _emit(report, "json" if as_json else output_format, output, limit, fail_on)


def _emit(report: Report, chosen: str, output: Path | None, limit: int, fail_on: FailOn) -> None:
    """Write the report in the chosen format (to ``output`` or stdout) and exit with its exit code."""
    from rich.console import Console

    from streamdetect.reporting.console import render_report
    from streamdetect.reporting.document import layout
    from streamdetect.reporting.junit import junit_xml
    from streamdetect.reporting.markdown import markdown

    target = Console(file=io.StringIO(), width=120) if output is not None else Console()
    if chosen == "human":
        render_report(target, report, limit=limit, fail_on=fail_on)
        text = target.file.getvalue() if output is not None else None  # type: ignore[attr-defined]
    elif chosen == "json":
        text = report.to_json() + "\n"
    elif chosen == "markdown":
        text = markdown(layout(report, limit, fail_on))
    else:
        text = junit_xml(report, fail_on)
    if output is not None:
        _write(output, text or "")
    elif text is not None:
        click.echo(text, nl=False)
    sys.exit(report.exit_code_for(fail_on))


@cli.command(epilog=EXIT_CODES)
@click.argument("topology", type=click.Path(path_type=Path))
@BOOTSTRAP
@click.option("--format", "output_format", type=click.Choice(FORMATS), default="human", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option(
    "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write the report to this file, not stdout."
)
@click.option("--limit", default=20, show_default=True, help="Findings shown per channel (human and markdown).")
@click.option("--fail-on", type=click.Choice(["any", "certain"]), default="any", show_default=True)
@fail_cleanly
def findings(
    topology: Path, bootstrap: str, output_format: str, as_json: bool, output: Path | None, limit: int, fail_on: FailOn
) -> None:
    """The findings open now on TOPOLOGY's findings topic (written by `streamdetect worker`), reported as
    `check` reports them, with the same exit codes; and the checks the worker reported incomplete (an
    input they read, the private table, not seen): then exit code 4 when nothing fails the run."""
    from streamdetect.checks.findings import finding_from_dict
    from streamdetect.detector import Detector
    from streamdetect.engine import Report, checks_to_run
    from streamdetect.io.topology_file import load_topology
    from streamdetect.stream.events import EVENT_MEMBERS, fold_events
    from streamdetect.stream.publish import read_topic
    from streamdetect.stream.topics import findings_topic

    model = load_topology(topology)
    names = checks_to_run(model, None)
    try:
        opened, incomplete = fold_events(read_topic(bootstrap, findings_topic(model)))
        rebuilt = [finding_from_dict(body) for body in opened.values()]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise TopologyError(f"an event of the findings topic is malformed: {exc}") from None
    cut = 0
    for (found, body), finding in zip(opened.items(), rebuilt, strict=True):
        if "truncated" in body:  # a class listed in part: its id is the whole finding's
            finding.__dict__["id"] = found
            cut += 1
    if cut:
        click.echo(
            f"note: {cut} finding(s) list only their first members (events list at most {EVENT_MEMBERS} of a "
            "class); `streamdetect check` or `explain` lists them all",
            err=True,
        )
    order = {name: i for i, name in enumerate(names)}
    rebuilt.sort(key=lambda f: (order.get(f.check, len(order)), f.order_key))
    counts = {name: sum(1 for f in rebuilt if f.check == name) for name in names}
    summaries = Detector(model, names).summaries(counts)
    report = Report(model.name, tuple(summaries), tuple(rebuilt), incomplete=incomplete)
    _emit(report, "json" if as_json else output_format, output, limit, fail_on)


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise TopologyError(f"cannot write the report (--output): {exc.strerror}", file=str(path)) from None


@cli.command(epilog=EXIT_CODES)
@click.argument("topology", type=click.Path(path_type=Path))
@click.option("--finding", "reference", required=True, help="The finding's id (stable), or its # in the report.")
@click.option(
    "--report",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A saved JSON report holding the finding: then only its own rows are joined, no check is rerun.",
)
@click.option("--check", "checks", multiple=True, type=click.Choice(CHECKS), help="Run only this check (repeatable).")
@click.option("--k", type=click.IntRange(min=2, max=MAX_K), help="Override every check's threshold k.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: the finding and its explanation.")
@fail_cleanly
def explain(
    topology: Path, reference: str, report: Path | None, checks: tuple[str, ...], k: int | None, as_json: bool
) -> None:
    """Explain one finding of `streamdetect check TOPOLOGY` (same --check and --k): the rows that produce it.

    With --report the finding is read from that report and only what it needs is computed; without it
    the checks are rerun to find it.
    """
    from rich.console import Console
    from rich.table import Table

    from streamdetect.check_plan import plan_checks
    from streamdetect.io.sources import load_data
    from streamdetect.io.topology_file import load_topology

    model = load_topology(topology)
    names: Sequence[str] | None = checks or None
    if report is not None:
        finding = _finding_in_report(report, reference)
        names = [finding.check]
        unknown = sorted(set(finding.views) - {view.name for view in model.views})
        if unknown:
            raise TopologyError(
                f"finding {finding.id} names view(s) {', '.join(unknown)} that {topology} does not define: "
                "the report is of another topology",
                file=str(report),
            )
    plan = plan_checks(model, names, k=k)
    views, table = load_data(model, with_table=plan.needs_table or model.table.source is not None)
    if report is None:
        finding = _locate(model, views, table, plan.names, k, reference)
    sections = _sections(model, views, table, finding)
    if as_json:
        explanation = [
            {
                "title": title,
                "columns": frame.columns,
                "rows": [list(map(_json_cell, row)) for row in frame.iter_rows()],
            }
            for title, frame in sections
        ]
        click.echo(json.dumps({"finding": finding.to_dict(), "explanation": explanation}, ensure_ascii=False))
        return
    console = Console()
    console.print_json(json.dumps(finding.to_dict()))
    for title, frame in sections:
        console.print(f"\n[bold]{title}[/bold]")
        rendered = Table(show_header=True)
        for column in frame.columns:
            rendered.add_column(column)
        for row in frame.iter_rows():
            rendered.add_row(*(str(value) for value in row))
        console.print(rendered)


def _sections(
    model: Topology, views: Mapping[str, pl.DataFrame], table: pl.DataFrame | None, finding: Finding
) -> list[tuple[str, pl.DataFrame]]:
    """The rows behind a finding, as its check's registration explains them."""
    return REGISTRY[finding.check].explainer(model, views, table, finding)


def _locate(
    model: Topology,
    views: Mapping[str, pl.DataFrame],
    table: pl.DataFrame | None,
    names: Sequence[str],
    k: int | None,
    reference: str,
) -> Finding:
    """The finding with this id, running one check at a time and stopping at the one that has it (a
    position needs every check before it, in report order)."""
    from streamdetect.engine import run_checks

    if _is_position(reference):
        return _pick(run_checks(model, views, table=table, checks=names, k=k).findings, reference, "the report")
    for name in names:
        found = run_checks(model, views, table=table, checks=[name], k=k).findings
        if any(finding.id == reference for finding in found):
            return _pick(found, reference, "the report")
    return _pick((), reference, "the report")


def _json_cell(value: object) -> object:
    return value if value is None or isinstance(value, (str, int, float, bool)) else str(value)


def _is_position(reference: str) -> bool:
    """A finding's # in the report rather than its id (ids are 16 hex digits)."""
    return reference.isdigit() and len(reference) < 16


def _pick(findings: Sequence[Finding], reference: str, where: str) -> Finding:
    """The finding with this id, or at this 1-based position."""
    if _is_position(reference):
        number = int(reference)
        if not 1 <= number <= len(findings):
            raise TopologyError(f"--finding {number}: {where} has {len(findings)} finding(s)")
        return findings[number - 1]
    for finding in findings:
        if finding.id == reference:
            return finding
    raise TopologyError(f"--finding {reference}: no finding with this id in {where} (ids are 16 hex digits)")


def _finding_in_report(path: Path, reference: str) -> Finding:
    """The finding ``reference`` (id or position) of a saved JSON report, rebuilt."""
    from streamdetect.checks.findings import finding_from_dict
    from streamdetect.reporting.baseline import accepted_ids

    accepted_ids(path)  # validates the file as a report, naming it when it is not
    entries = json.loads(path.read_text(encoding="utf-8"))["findings"]
    try:
        findings = [finding_from_dict(entry) for entry in entries]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise TopologyError(f"a finding of the report is malformed: {exc}", file=str(path)) from None
    return _pick(findings, reference, f"the report {path}")


@cli.command()
@click.argument("topology", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the channels as JSON (same as --format json).")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["table", "json", "dot"]),
    default="table",
    show_default=True,
    help="dot: the view-join graph as Graphviz DOT, joins labelled with the shared attributes and the "
    "channels of the topology's current findings in red (render with `dot -Tsvg`).",
)
@click.option("--max-level", type=click.IntRange(min=1), help="Stop the closure at this many views per channel.")
@click.option(
    "--universal",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the merged universal-relation stream (every joined view over the union schema) to this Parquet file.",
)
@click.option("--max-rows", default=100_000, show_default=True, help="Rows per channel in --universal.")
@click.option(
    "--channels",
    "holding",
    metavar="VIEW[,VIEW...]",
    help="List only the channels holding these views (every connected set of views grows with their number).",
)
@click.option(
    "--max-channels",
    default=10_000,
    show_default=True,
    type=click.IntRange(min=1),
    help="Refuse, before any join, a listing of more channels than this.",
)
@click.option("--counts/--no-counts", default=True, show_default=True, help="Count each joined view's rows.")
@fail_cleanly
def closure(
    topology: Path,
    as_json: bool,
    output_format: str,
    max_level: int | None,
    universal: Path | None,
    max_rows: int,
    holding: str | None,
    max_channels: int,
    counts: bool,
) -> None:
    """List TOPOLOGY's channels (connected sets of views) by level, with schemas and exact row counts.

    The closure grows with the connected sets of views (exponentially, over many views): the listing is
    refused past --max-channels, before any join, naming the level; bound it with --max-level or list
    the channels holding some views with --channels."""
    from rich.console import Console
    from rich.progress import Progress

    from streamdetect.check_plan import plan_checks
    from streamdetect.engine import run_checks
    from streamdetect.io.sources import load_data, load_views
    from streamdetect.io.topology_file import load_topology
    from streamdetect.relational.universal import (
        ClosureTooLarge,
        channel_sizes,
        channels_up_to,
        universal_relation,
    )
    from streamdetect.reporting.dot import view_graph_dot

    model = load_topology(topology)
    if output_format == "dot":
        plan = plan_checks(model, max_level=max_level)
        frames, private = load_data(model, with_table=plan.needs_table)
        report = run_checks(model, frames, table=private, max_level=max_level, plan=plan)
        channels = {channel for f in report.findings for channel in f.channels_shown}
        click.echo(view_graph_dot(model.name, model.views, sorted(channels)), nl=False)
        return
    names = {view.name for view in model.views}
    held = frozenset(name.strip() for name in holding.split(",") if name.strip()) if holding else frozenset()
    if held - names:
        raise TopologyError(f"--channels names views the topology does not define: {', '.join(sorted(held - names))}")
    try:
        listed = channels_up_to(model.views, model.table.attributes, max_level, holding=held, limit=max_channels)
    except ClosureTooLarge as error:
        raise TopologyError(
            f"{error}: bound it with --max-level {max(error.level - 1, 1)}, list the channels holding some views "
            "with --channels, or raise --max-channels"
        ) from None
    sizes: list[list[ChannelSize]] | None = None
    if counts:
        views = load_views(model)
        with Progress(console=Console(stderr=True), transient=True, disable=not sys.stderr.isatty()) as bar:
            task = bar.add_task("counting joined rows", total=sum(len(level) for level in listed))
            sizes = channel_sizes(
                model.views,
                views,
                model.table.attributes,
                max_level,
                holding=held,
                progress=lambda done, _total: bar.update(task, completed=done),
            )
    rows_of = {size.channel: size for level in sizes or [] for size in level}
    if as_json or output_format == "json":
        click.echo(json.dumps(_closure_document(listed, rows_of if counts else None)))
    else:
        console = Console()
        for table in _closure_tables(listed, rows_of if counts else None):
            console.print(table)
    if universal is not None:
        views = load_views(model)
    if universal is not None:
        merged = universal_relation(model.views, views, model.table.attributes, max_rows, max_level)
        universal.parent.mkdir(parents=True, exist_ok=True)
        merged.write_parquet(universal)
        click.echo(f"wrote {merged.height:,} rows to {universal} (at most {max_rows:,} per channel)", err=True)


def _closure_document(
    listed: list[list[Channel]], rows_of: dict[Channel, ChannelSize] | None
) -> list[dict[str, object]]:
    """``closure --json``: per channel its level, views, attributes and (with counts) rows."""
    document = []
    for level in listed:
        for channel in level:
            entry: dict[str, object] = {
                "level": channel.level,
                "views": list(channel.views),
                "attributes": list(channel.attributes),
            }
            if rows_of is not None:
                size = rows_of[channel]
                entry["rows"] = int(size.rows) if size.exact else size.rows
                entry["exact"] = size.exact
            document.append(entry)
    return document


def _closure_tables(listed: list[list[Channel]], rows_of: dict[Channel, ChannelSize] | None) -> list[Table]:
    """``closure``: a table per non-empty level."""
    from rich.table import Table

    tables = []
    for number, level in enumerate(listed, start=1):
        if not level:
            continue
        table = Table(title=f"level {number}: {len(level)} channel(s)", title_justify="left")
        table.add_column("views")
        table.add_column("schema")
        if rows_of is not None:
            table.add_column("rows", justify="right")
        for channel in level:
            cells = [channel.label, ", ".join(channel.attributes)]
            if rows_of is not None:
                size = rows_of[channel]
                cells.append(f"{int(size.rows):,}" if size.exact else f"~{size.rows:.3g} (approximate)")
            table.add_row(*cells)
        tables.append(table)
    return tables


cli.add_command(bench)
cli.add_command(broker)
cli.add_command(anonymize)
cli.add_command(dependencies)
cli.add_command(fragment)
cli.add_command(loose)
cli.add_command(remediate)
cli.add_command(publish)
cli.add_command(worker)
cli.add_command(import_views)
cli.add_command(connect)
cli.add_command(capture)


#: The cyclic garbage collector's thresholds in a streamdetect process (``gc.set_threshold``): a collection
#: of the youngest generation after 10,000 allocations, not CPython's 700. A stream update allocates
#: containers by the ten thousand (covers, their value sets, findings) that live on, so that at 700 the
#: collector ran about a thousand times in thirty BP micro-batches, and its full collections (each
#: traversing every live container, ~0.1 s) took 0.8-1.0 s of 11 s while collecting nothing; at 10,000:
#: 0.25 s (docs/benchmarks-history.md, "The garbage collector's thresholds"). Older generations as CPython
#: has them. A process embedding the library keeps its own settings.
GC_THRESHOLDS = (10_000, 10, 10)


def main() -> None:
    """Console-script entry point."""
    gc.set_threshold(*GC_THRESHOLDS)
    cli()
