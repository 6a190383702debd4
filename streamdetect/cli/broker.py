"""``streamdetect broker``: a local Apache Kafka broker (KRaft, 127.0.0.1) for tests, demos and trials."""

from __future__ import annotations

import click

from streamdetect.cli.errors import fail_cleanly
from streamdetect.stream import broker as local
from streamdetect.stream.broker import DEFAULT_PORT

PORT = click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    help="The broker's port on 127.0.0.1.",
)


@click.group()
def broker() -> None:
    """Start or stop a local Kafka broker (fetched once from Maven Central with Maven; needs a JDK 17+)."""


@broker.command()
@PORT
@click.option("--timeout", type=click.FloatRange(min=1), default=90.0, show_default=True, help="Seconds to wait.")
@click.option(
    "--sasl-port",
    type=click.IntRange(1, 65535),
    help="Also listen here with SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256/512), to try authenticated clients.",
)
@click.option(
    "--sasl-user",
    "sasl_users",
    multiple=True,
    metavar="NAME:PASSWORD",
    help="A user of the SASL listener (repeatable; letters, digits, '.', '_', '-').",
)
@fail_cleanly
def start(port: int, timeout: float, sasl_port: int | None, sasl_users: tuple[str, ...]) -> None:
    """Start a broker and wait until it answers; print its bootstrap address (a running one is kept)."""
    users = dict(user.partition(":")[::2] for user in sasl_users)
    if sasl_users and sasl_port is None:
        raise click.UsageError("--sasl-user needs --sasl-port")
    started = local.start(
        port,
        timeout_s=timeout,
        progress=lambda message: click.echo(message, err=True),
        sasl_port=sasl_port,
        sasl_users=users,
    )
    if sasl_port is not None:
        click.echo(f"SASL_PLAINTEXT listener on 127.0.0.1:{sasl_port}", err=True)
    click.echo(
        f"broker running (pid {started.pid}, log {started.log}); stop it with: streamdetect broker stop --port {port}",
        err=True,
    )
    click.echo(started.bootstrap)


@broker.command()
@PORT
@fail_cleanly
def stop(port: int) -> None:
    """Stop the broker started on the port and remove its data."""
    if local.stop(port):
        click.echo(f"stopped the broker on 127.0.0.1:{port}", err=True)
    else:
        click.echo(f"no broker started by streamdetect runs on 127.0.0.1:{port}", err=True)
