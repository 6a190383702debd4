"""``streamdetect import-views``: a topology from the views a PostgreSQL database defines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from streamdetect.cli.errors import fail_cleanly


@click.command("import-views")
@click.argument("database", metavar="DATABASE")
@click.option("--schema", default="public", show_default=True, help="The schema whose views are read (pg_views).")
@click.option("--table", "table", required=True, help="The private table the views select from.")
@click.option(
    "--identifier", "identifiers", multiple=True, required=True, help="A column that identifies a person (repeatable)."
)
@click.option("--sensitive", "sensitive", multiple=True, required=True, help="A sensitive column (repeatable).")
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    help="Write the topology here (it must not exist) instead of stdout.",
)
@fail_cleanly
def import_views(
    database: str,
    schema: str,
    table: str,
    identifiers: tuple[str, ...],
    sensitive: tuple[str, ...],
    output: Path | None,
) -> None:
    """Write a topology of TABLE in DATABASE (a postgresql:// URI; the password in PGPASSWORD or .pgpass) with
    every view of SCHEMA that is a projection and a selection of it, as its SQL. Views that are not (a join,
    an aggregate) and columns of types the checks do not read are left out, each named on stderr."""
    import yaml

    from streamdetect.errors import TopologyError
    from streamdetect.io.imported_views import import_views as imported
    from streamdetect.io.topology_file import load_topology

    if output is not None and output.exists():
        raise TopologyError("exists already; choose another file or remove it", file=str(output))
    result = imported(database, schema, table, identifiers, sensitive)
    header = f"# The views of schema {schema} over {table} in {database}, read from pg_views.\n"
    text = header + yaml.dump(result.document, Dumper=_dumper(yaml), sort_keys=False, allow_unicode=True)
    for what, why in result.left_out:
        click.echo(f"left out {what}: {why}", err=True)
    if output is None:
        click.echo(text, nl=False)
        return
    output.write_text(text)
    try:
        load_topology(output)  # what is written loads as written
    except TopologyError:
        output.unlink()
        raise
    click.echo(f"wrote {output}: {len(result.document['views'])} view(s)", err=True)


def _dumper(yaml: Any) -> Any:
    """YAML's safe dumper writing multi-line SQL as a literal block, as the database wrote it."""

    class Dumper(yaml.SafeDumper):  # type: ignore[misc]
        pass

    def text(dumper: Any, value: str) -> Any:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)

    Dumper.add_representer(str, text)
    return Dumper
