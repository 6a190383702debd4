"""``streamdetect connect`` (Kafka Connect with Debezium on the table's database) and ``streamdetect
capture`` (its change events into the views' records): the private table's changes onto the stream."""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from types import FrameType

import click

from streamdetect.cli.errors import fail_cleanly
from streamdetect.cli.stream import BOOTSTRAP

DATABASE = click.option(
    "--database", metavar="URI", help="The table's PostgreSQL database (default: the topology's table.source)."
)


@click.group()
def connect() -> None:
    """Start or stop Kafka Connect with Debezium's PostgreSQL connector on a topology's table (fetched once
    from Maven Central with Maven; needs a JDK 17+)."""


@connect.command("start")
@click.argument("topology", type=click.Path(path_type=Path))
@BOOTSTRAP
@DATABASE
@click.option("--port", type=click.IntRange(1, 65535), default=8083, show_default=True, help="Connect's REST port.")
@click.option("--timeout", type=click.FloatRange(min=1), default=180.0, show_default=True, help="Seconds to wait.")
@click.option(
    "--retry-for",
    type=click.FloatRange(min=1),
    default=300.0,
    show_default=True,
    help="Seconds a retriable error (the database unreachable, a change it cannot send) is retried before the "
    "connector fails and `capture` stops saying why.",
)
@fail_cleanly
def connect_start(
    topology: Path, bootstrap: str, database: str | None, port: int, timeout: float, retry_for: float
) -> None:
    """Stream TOPOLOGY's table changes to Kafka: a snapshot first, then every committed change (needs
    wal_level = logical and REPLICA IDENTITY FULL on the table; the password from PGPASSWORD or .pgpass).
    A worker already running is kept, its connector restarted if it failed."""
    from streamdetect.io.topology_file import load_topology
    from streamdetect.stream import connect as local

    model = load_topology(topology)
    started = local.start(
        model,
        bootstrap,
        database=database,
        port=port,
        timeout_s=timeout,
        retry_for_s=retry_for,
        progress=lambda m: click.echo(m, err=True),
    )
    click.echo(
        f"Debezium running (pid {started.pid}, log {started.log}), changes on {started.topic}; stop it with: "
        f"streamdetect connect stop {topology}",
        err=True,
    )
    click.echo(started.topic)


@connect.command("stop")
@click.argument("topology", type=click.Path(path_type=Path))
@DATABASE
@click.option(
    "--forget",
    is_flag=True,
    help="Also drop its offsets and the database's replication slot and publication (a next start snapshots anew).",
)
@fail_cleanly
def connect_stop(topology: Path, database: str | None, forget: bool) -> None:
    """Stop TOPOLOGY's Connect worker; it starts again where it stopped unless --forget."""
    from streamdetect.io.topology_file import load_topology
    from streamdetect.stream import connect as local

    stopped = local.stop(load_topology(topology), forget=forget, database=database)
    click.echo(
        ("stopped" if stopped else "no Connect worker was running") + (", forgotten" if forget else ""), err=True
    )


@click.command()
@click.argument("topology", type=click.Path(path_type=Path))
@BOOTSTRAP
@DATABASE
@click.option("--loglevel", type=click.Choice(["debug", "info", "warning"]), default="info", show_default=True)
@fail_cleanly
def capture(topology: Path, bootstrap: str, database: str | None, loglevel: str) -> None:
    """Turn TOPOLOGY's table changes (from `streamdetect connect`) into the records of the table's and the
    views' topics, exactly once; runs until interrupted, or exits 2 once it has translated every change
    read when the connector `connect start` runs on this machine failed."""
    from streamdetect.io.topology_file import load_topology
    from streamdetect.stream import connect as local
    from streamdetect.stream.capture import run_capture

    logging.basicConfig(level=loglevel.upper(), format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(max(logging.WARNING, logging.getLogger().level))  # its INFO is per request
    stopping: list[int] = []

    def interrupted(signum: int, _frame: FrameType | None) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)
    changes = records = 0

    def report(taken: int, sent: int) -> None:
        nonlocal changes, records
        changes, records = changes + taken, records + sent

    model = load_topology(topology)
    run_capture(
        model,
        bootstrap,
        database=database,
        stop=lambda: bool(stopping),
        report=report,
        failure=lambda: local.failure(model),
    )
    click.echo(f"stopped: {changes:,} changes translated into {records:,} records", err=True)
