"""The ``streamdetect`` command: ``check``, ``closure`` and ``bench``.

Exit codes: 0 nothing found, 1 findings, 2 bad input (one message naming the file, the key path and
what is wrong, on stderr; never a traceback), 3 an internal error (a bug; ``STREAMDETECT_DEBUG=1``
shows its traceback).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table

from streamdetect.checks.findings import AssociationCoverFinding, LinkageFinding
from streamdetect.cli.bench import bench
from streamdetect.engine import CHECKS, FailOn, checks_to_run, needs_table, run_checks
from streamdetect.errors import StreamdetectError, TopologyError
from streamdetect.explanations import explain_cover, explain_linkage, explain_sind
from streamdetect.io.sources import load_data, load_views
from streamdetect.io.topology_file import load_topology
from streamdetect.model.topology import MAX_K
from streamdetect.relational.universal import channel_sizes, universal_relation
from streamdetect.reporting.console import progress_bars, render_report

F = TypeVar("F", bound=Callable[..., Any])

EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3


def fail_cleanly(function: F) -> F:
    """Turn streamdetect's input errors into one line on stderr and exit code 2."""

    @wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except StreamdetectError as error:
            click.echo(f"error: {error}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        except Exception as error:  # a bug of ours: one line for the user, the traceback on demand
            if os.environ.get("STREAMDETECT_DEBUG"):
                raise
            click.echo(
                f"internal error: {type(error).__name__}: {error} "
                "(a bug in streamdetect; rerun with STREAMDETECT_DEBUG=1 for the traceback)",
                err=True,
            )
            sys.exit(EXIT_INTERNAL)

    return wrapper  # type: ignore[return-value]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="streamdetect")
def cli() -> None:
    """Detect privacy disclosure across the views of one private table."""


@cli.command()
@click.argument("topology", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (docs/report-format.md).")
@click.option("--check", "checks", multiple=True, type=click.Choice(CHECKS), help="Run only this check (repeatable).")
@click.option("--k", type=click.IntRange(min=2, max=MAX_K), help="Override every check's threshold k.")
@click.option("--max-level", type=click.IntRange(min=1), help="Stop the closure at this many views per channel.")
@click.option("--limit", default=20, show_default=True, help="Findings shown per channel (human output).")
@click.option(
    "--fail-on",
    type=click.Choice(["any", "certain"]),
    default="any",
    show_default=True,
    help="Exit 1 on any finding, or only on certain ones (possible links then exit 0).",
)
@fail_cleanly
def check(
    topology: Path,
    as_json: bool,
    checks: tuple[str, ...],
    k: int | None,
    max_level: int | None,
    limit: int,
    fail_on: FailOn,
) -> None:
    """Check TOPOLOGY's views; exit 0 when nothing is found, 1 when something is, 2 on bad input."""
    model = load_topology(topology)
    names = checks_to_run(model, checks or None)
    views, table = load_data(model, with_table=needs_table(model, names))
    err = Console(stderr=True)
    with progress_bars(err) as progress:
        report = run_checks(model, views, table=table, checks=names, k=k, max_level=max_level, progress=progress)
    if as_json:
        click.echo(report.to_json())
    else:
        render_report(Console(), report, limit=limit, fail_on=fail_on)
    sys.exit(report.exit_code_for(fail_on))


@cli.command()
@click.argument("topology", type=click.Path(path_type=Path))
@click.option("--finding", "number", required=True, type=click.IntRange(min=1), help="The finding's # in the report.")
@click.option("--check", "checks", multiple=True, type=click.Choice(CHECKS), help="Run only this check (repeatable).")
@click.option("--k", type=click.IntRange(min=2, max=MAX_K), help="Override every check's threshold k.")
@fail_cleanly
def explain(topology: Path, number: int, checks: tuple[str, ...], k: int | None) -> None:
    """Explain finding N of `streamdetect check TOPOLOGY` (same --check and --k): the rows that produce it."""
    model = load_topology(topology)
    names = checks_to_run(model, checks or None)
    views, table = load_data(model, with_table=needs_table(model, names) or model.table.source is not None)
    report = run_checks(model, views, table=table, checks=names, k=k)
    if number > len(report.findings):
        raise TopologyError(f"--finding {number}: the report has {len(report.findings)} finding(s)")
    finding = report.findings[number - 1]
    console = Console()
    console.print_json(json.dumps(finding.to_dict()))
    if isinstance(finding, LinkageFinding):
        sections = explain_linkage(model, views, finding)
    elif isinstance(finding, AssociationCoverFinding):
        sections = explain_cover(model, views, finding)
    else:
        assert table is not None  # the sind checks ran, so the table was read
        sections = explain_sind(model, table, finding)
    for title, frame in sections:
        console.print(f"\n[bold]{title}[/bold]")
        rendered = Table(show_header=True)
        for column in frame.columns:
            rendered.add_column(column)
        for row in frame.iter_rows():
            rendered.add_row(*(str(value) for value in row))
        console.print(rendered)


@cli.command()
@click.argument("topology", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the channels as JSON.")
@click.option("--max-level", type=click.IntRange(min=1), help="Stop the closure at this many views per channel.")
@click.option(
    "--universal",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the merged universal-relation stream (every joined view over the union schema) to this Parquet file.",
)
@click.option("--max-rows", default=100_000, show_default=True, help="Rows per channel in --universal.")
@fail_cleanly
def closure(topology: Path, as_json: bool, max_level: int | None, universal: Path | None, max_rows: int) -> None:
    """List TOPOLOGY's channels (connected sets of views) by level, with schemas and exact row counts."""
    model = load_topology(topology)
    views = load_views(model)
    levels = channel_sizes(model.views, views, model.table.attributes, max_level)
    if as_json:
        document = [
            {
                "level": size.channel.level,
                "views": list(size.channel.views),
                "attributes": list(size.channel.attributes),
                "rows": int(size.rows) if size.exact else size.rows,
                "exact": size.exact,
            }
            for level in levels
            for size in level
        ]
        click.echo(json.dumps(document))
    else:
        console = Console()
        for number, level in enumerate(levels, start=1):
            table = Table(title=f"level {number}: {len(level)} channel(s)", title_justify="left")
            table.add_column("views")
            table.add_column("schema")
            table.add_column("rows", justify="right")
            for size in level:
                rows = f"{int(size.rows):,}" if size.exact else f"~{size.rows:.3g} (approximate)"
                table.add_row(size.channel.label, ", ".join(size.channel.attributes), rows)
            console.print(table)
    if universal is not None:
        merged = universal_relation(model.views, views, model.table.attributes, max_rows, max_level)
        universal.parent.mkdir(parents=True, exist_ok=True)
        merged.write_parquet(universal)
        click.echo(f"wrote {merged.height:,} rows to {universal} (at most {max_rows:,} per channel)", err=True)


cli.add_command(bench)


def main() -> None:
    """Console-script entry point."""
    cli()
