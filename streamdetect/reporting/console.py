"""Human output of a report on a terminal: rich tables of :func:`~streamdetect.reporting.document.layout`,
plain text when the output is not a terminal; progress bars for long checks."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from streamdetect.engine import FailOn, Report
from streamdetect.reporting.document import Block, layout
from streamdetect.reporting.plain import plain_text


def render_report(console: Console, report: Report, limit: int = 20, fail_on: FailOn = "any") -> None:
    """Print the report: rich tables on a terminal, plain text otherwise (:mod:`.plain`).

    ``#`` is the finding's position and ``id`` its stable id, either of which ``streamdetect explain
    --finding`` takes.
    """
    document = layout(report, limit, fail_on)
    if not console.is_terminal:
        console.out(plain_text(document), end="", highlight=False)
        return
    for section in document.sections:
        console.print(f"[bold]{section.heading}[/bold]")
        for block in section.blocks:
            _print_block(console, block)
    if any(section.blocks for section in document.sections):
        console.print(f"[dim]{document.legend}[/dim]")
    if document.withhold is not None:
        _print_block(console, document.withhold)
    colour = "bold red" if report.findings else "bold green"
    console.print(f"[{colour}]{document.summary}[/{colour}]")


def _print_block(console: Console, block: Block) -> None:
    title = f"[yellow]{block.title}[/yellow]" if block.warning else block.title
    table = Table(title=title, title_justify="left")
    for column in block.columns:
        table.add_column(column)
    for row in block.rows:
        table.add_row(*row)
    console.print(table)
    if block.omitted:
        console.print(f"  ... and {block.omitted} more (--limit, or --format json for all)")


@contextmanager
def progress_bars(
    console: Console, unit: str = "channel joins"
) -> Iterator[Callable[[str, int], Callable[[int, int], None]]]:
    """A progress factory for :func:`streamdetect.engine.run_checks` (or, counting ``unit``, for the reads of
    :func:`streamdetect.io.sources.load_data`), drawn only on a terminal."""
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
        task = progress.add_task(f"{name}: {unit}", total=total)

        def advance(done: int, now: int) -> None:
            # A total may grow as the work finds more to do (the levels of a search above the kept ones).
            progress.update(task, completed=done, total=max(now, total))

        return advance

    with progress:
        yield factory
