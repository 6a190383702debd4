"""The streaming commands: ``streamdetect publish`` and ``streamdetect worker``."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from streamdetect.cli.errors import fail_cleanly
from streamdetect.errors import TopologyError
from streamdetect.stream.settings import COMPACT_BYTES, REPLAY_RETENTION_S, STORES, WorkerSettings

if TYPE_CHECKING:
    from streamdetect.model.topology import Topology

log = logging.getLogger(__name__)

BOOTSTRAP_ENV = "STREAMDETECT_BOOTSTRAP_SERVERS"
#: The worker's --partitions when not given (a deployment sets it once for every worker).
PARTITIONS_ENV = "STREAMDETECT_PARTITIONS"

BOOTSTRAP = click.option(
    "--bootstrap-servers",
    "bootstrap",
    default=lambda: os.environ.get(BOOTSTRAP_ENV) or "127.0.0.1:9092",
    show_default=f"${BOOTSTRAP_ENV}, else 127.0.0.1:9092",
    help="Kafka brokers, host:port[,host:port...].",
)


@click.command()
@click.argument("topology", type=click.Path(path_type=Path))
@BOOTSTRAP
@click.option("--batch-rows", type=click.IntRange(min=1), default=500, show_default=True, help="Rows per record.")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), help="At most this many rows per second.")
@click.option("--loop", is_flag=True, help="Start again at the end, forever (a demo's endless feed; Ctrl-C stops).")
@click.option(
    "--format",
    "form",
    type=click.Choice(["arrow", "json"]),
    default="arrow",
    show_default=True,
    help="Record values as Arrow IPC or JSON lines.",
)
@click.option("--partitions", type=click.IntRange(min=1), default=1, show_default=True, help="Of topics created.")
@click.option(
    "--table/--no-table",
    "send_table",
    default=None,
    help="Stream table.source to the table's topic too [default: when a configured check reads the table].",
)
@fail_cleanly
def publish(
    topology: Path,
    bootstrap: str,
    batch_rows: int,
    rate: float | None,
    loop: bool,
    form: str,
    partitions: int,
    send_table: bool | None,
) -> None:
    """Create TOPOLOGY's topics and stream each view's file into its topic, batch by batch (and the private
    table's rows into the table's topic, for the checks that read it)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from streamdetect.check_plan import table_readers
    from streamdetect.io.sources import load_data
    from streamdetect.io.topology_file import load_topology
    from streamdetect.stream.publish import publish as send
    from streamdetect.stream.topics import table_topic

    model = load_topology(topology)
    readers = table_readers(model)
    if send_table is None:
        send_table = bool(readers)
    if send_table and model.table.source is None:
        if readers:
            click.echo(
                f"warning: the {', '.join(readers)} check(s) read the private table, and the topology gives no "
                f"table.source: a worker reports them incomplete until the table's rows arrive on "
                f"{table_topic(model)}",
                err=True,
            )
            send_table = False
        else:
            raise TopologyError("--table: the topology gives no table.source", file=model.path, key="table.source")
    views, table = load_data(model, with_table=send_table)
    table = table if send_table else None  # (read anyway when a view is computed from it)
    total = None if loop else sum(frame.height for frame in views.values()) + (table.height if table is not None else 0)
    with Progress(
        TextColumn("publishing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), transient=True
    ) as bar:
        task = bar.add_task("rows", total=total)
        sent = send(
            model,
            views,
            bootstrap,
            batch_rows=batch_rows,
            rate=rate,
            loop=loop,
            form=form,  # type: ignore[arg-type]
            partitions=partitions,
            progress=lambda rows: bar.advance(task, rows),
            table=table,
        )
    for name in sent.rows:
        click.echo(f"{name}: {sent.rows[name]:,} rows in {sent.records[name]:,} records", err=True)
    _topic_problems(model, bootstrap)


def _topic_problems(model: Topology, bootstrap: str) -> list[tuple[str, str, str]]:
    """The output topics that exist with another configuration than streamdetect gives them, as (kind,
    setting, message), each said on stderr at once."""
    from streamdetect.stream.publish import topic_problems
    from streamdetect.stream.topics import topic_configs

    found = []
    wanted = topic_configs(model)
    for topic, setting, what in topic_problems(model, bootstrap):
        kind = _topic_kind(model, topic)
        fix = f"kafka-configs --alter --entity-type topics --entity-name {topic} "
        fix += f"--add-config {setting}={wanted[topic][setting]}"
        message = f"topic {topic} ({kind}): {setting} {what}; fix it with `{fix}` (docs/streaming.md, Topics)"
        click.echo(f"warning: {message}", err=True)
        found.append((kind, setting, message))
    return found


def _topic_kind(model: Topology, topic: str) -> str:
    """What an output topic is, as the metrics label it: ``findings`` or ``dead-letters``."""
    from streamdetect.stream.topics import findings_topic

    return "findings" if topic == findings_topic(model) else "dead-letters"


class Duration(click.ParamType):
    """A duration option (``90s``, ``15m``, ``12h``, ``7d``, ``2w``) as seconds."""

    name = "duration"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> float:
        from streamdetect.io.topology_file import duration_seconds

        if isinstance(value, float):
            return value
        seconds = duration_seconds(value)
        if seconds is None or seconds <= 0:
            self.fail(f"expected a duration such as 7d, 12h, 15m or 90s, found {value!r}", param, ctx)
        return seconds


@click.command()
@click.argument("topology", type=click.Path(path_type=Path))
@BOOTSTRAP
@click.option(
    "--web-port", type=click.IntRange(1, 65535), help="Serve Faust's web pages on 127.0.0.1:PORT (off by default)."
)
@click.option(
    "--store",
    type=click.Choice(STORES),
    default=STORES[0],
    show_default=True,
    help="Where the state table's local copy lives: in memory (read from the changelog's start at every "
    "start), or in RocksDB files under --datadir (out of the process's memory; a restart reads only the "
    "changelog written since). Workers on one host with rocksdb:// need a --datadir each.",
)
@click.option("--datadir", type=click.Path(path_type=Path), help="The worker's local files [default: in the cache].")
@click.option(
    "--metrics-port", type=click.IntRange(1, 65535), help="Serve Prometheus metrics on http://HOST:PORT/metrics."
)
@click.option("--metrics-host", default="127.0.0.1", show_default=True, help="The address the metrics bind.")
@click.option(
    "--loglevel", type=click.Choice(["crit", "error", "warn", "info", "debug"]), default="warn", show_default=True
)
@click.option(
    "--partitions",
    type=click.IntRange(min=1),
    default=lambda: int(os.environ.get(PARTITIONS_ENV) or 1),
    show_default=f"${PARTITIONS_ENV}, else 1",
    help="Split the work by identifier value into this many partitions, which the workers of the topology "
    "share; every worker of a topology takes the same number.",
)
@click.option(
    "--session-timeout",
    type=click.FloatRange(min=6, max=300),
    default=30.0,
    show_default=True,
    help="Seconds the group waits for a silent worker before giving its partitions to the others.",
)
@click.option(
    "--universal-rows",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Write the universal-relation stream (the closure's joined tuples that matter to linkage) to its "
    "topic, at most N tuples per channel; 0: off.",
)
@click.option(
    "--coalesce",
    type=click.IntRange(min=1),
    default=32,
    show_default=True,
    help="Fold up to N records that are waiting together (a backlog drains in bigger, cheaper batches).",
)
@click.option(
    "--compact-bytes",
    type=click.IntRange(min=0),
    default=COMPACT_BYTES,
    show_default=True,
    help="Replace the state entries by a snapshot once this many bytes (and at least 1/64 of the state; "
    "its whole size after a withdrawal) were written since the last one: the changelog and a restart stay "
    "bounded; 0: never compact.",
)
@click.option(
    "--replay-retention",
    type=Duration(),
    default=f"{REPLAY_RETENTION_S / 86_400:g}d",
    show_default=True,
    help="How long a folded batch id is remembered to skip a redelivered record (kept in each snapshot; "
    "Kafka redelivers within minutes). A duration: 90s, 15m, 12h, 7d, 2w.",
)
@fail_cleanly
def worker(
    topology: Path,
    bootstrap: str,
    web_port: int | None,
    store: str,
    datadir: Path | None,
    metrics_port: int | None,
    metrics_host: str,
    loglevel: str,
    partitions: int,
    session_timeout: float,
    universal_rows: int,
    coalesce: int,
    compact_bytes: int,
    replay_retention: float,
) -> None:
    """Detect continuously: read TOPOLOGY's view topics, write findings and dead letters (Ctrl-C stops)."""
    from streamdetect.stream.allocators import return_freed_memory, return_polars_freed_memory

    # Before polars is loaded and the state built: the blocks allocated from here on are returned when freed.
    return_polars_freed_memory()
    return_freed_memory()
    from streamdetect.io.cache import cache_dir
    from streamdetect.io.topology_file import load_topology
    from streamdetect.stream.metrics import WorkerMetrics
    from streamdetect.stream.publish import prepare_worker_topics
    from streamdetect.stream.security import from_environment
    from streamdetect.stream.topics import topic_configs
    from streamdetect.stream.worker import app_id, build_app, run_worker

    model = load_topology(topology)
    directory = datadir or cache_dir() / "worker" / app_id(model)
    directory.mkdir(parents=True, exist_ok=True)
    metrics = WorkerMetrics()
    settings = WorkerSettings(
        bootstrap,
        directory,
        from_environment(),
        partitions=partitions,
        store=store,
        web_port=web_port,
        session_timeout_s=session_timeout,
        universal_rows=universal_rows,
        coalesce=coalesce,
        compact_bytes=compact_bytes or None,
        replay_retention_s=replay_retention,
    )
    app = build_app(model, settings, metrics)  # checks the settings before anything is created on the broker
    prepare_worker_topics(model, bootstrap, partitions, app_id(model), universal=universal_rows > 0)
    problems = _topic_problems(model, bootstrap)
    given = {_topic_kind(model, topic): list(configs) for topic, configs in topic_configs(model).items()}
    metrics.topics([(kind, setting) for kind, setting, _ in problems], given)

    @app.task  # type: ignore[untyped-decorator]  # faust.App.task is untyped
    async def say_topic_problems() -> None:
        """In the worker's log, once it runs: the output topics it found misconfigured."""
        for _, _, message in problems:
            log.warning("%s", message)

    if metrics_port is not None:
        metrics.serve(metrics_port, metrics_host)
    run_worker(app, loglevel)
