"""Remediation commands: ``fragment`` (minimal correct fragmentation by SAT)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from streamdetect.cli.errors import fail_cleanly
from streamdetect.errors import TopologyError
from streamdetect.io.topology_file import load_topology
from streamdetect.remediation.fragmentation import minimal_fragmentation

FRAGMENT_EXIT_CODES = (
    "Exit codes: 0 a correct fragmentation was found; 1 none exists (the reason names the constraints and "
    "requirements that clash); 2 bad input (one line naming the file, the key path and what is wrong); "
    "3 internal error, a bug (STREAMDETECT_DEBUG=1 shows the traceback)."
)


@click.command(epilog=FRAGMENT_EXIT_CODES)
@click.argument("topology", type=click.Path(path_type=Path))
@click.option(
    "--json", "as_json", is_flag=True, help='Print {"fragments": [[attributes...], ...]} (or null and a reason).'
)
@fail_cleanly
def fragment(topology: Path, as_json: bool) -> None:
    """Split the table into the fewest fragments that keep every confidentiality constraint and satisfy
    every visibility requirement (the topology's ``fragmentation:``), by SAT.

    Attributes that no requirement mentions are in no fragment; fragments share no attribute, so they
    cannot be joined (De Capitani di Vimercati et al., VLDB 2010, Problem 4.1)."""
    model = load_topology(topology)
    spec = model.fragmentation
    if spec is None:
        raise TopologyError(
            "missing; declare constraints (attribute sets never released together) and visibility "
            'requirements, e.g. {constraints: [[SSN], [Patient, Illness]], visibility: ["Patient OR ZIP"]}',
            file=str(topology),
            key="fragmentation",
        )
    began = time.perf_counter()
    result = minimal_fragmentation(model.table.attributes, spec.constraints, spec.visibility)
    elapsed = time.perf_counter() - began
    if as_json:
        body: dict[str, object] = {
            "fragments": None if result.fragments is None else [list(f) for f in result.fragments]
        }
        if result.reason is not None:
            body["reason"] = result.reason
        click.echo(json.dumps(body))
    else:
        console = Console()
        if result.fragments is None:
            console.print(f"[bold red]{result.reason}[/]")
        else:
            table = Table(title=f"{len(result.fragments)} fragment(s) of {model.table.name}")
            table.add_column("fragment")
            table.add_column("attributes")
            for i, attributes in enumerate(result.fragments, start=1):
                table.add_row(f"F{i}", ", ".join(attributes))
            console.print(table)
            released = {a for f in result.fragments for a in f}
            withheld = [a for a in model.table.attributes if a not in released]
            if withheld:
                console.print(f"withheld: {', '.join(withheld)}")
        tried = ", ".join(str(m) for m in result.tried)
        console.print(f"[dim]SAT with {tried} fragment(s) in {elapsed * 1000:.1f} ms[/]")
    if result.fragments is None:
        raise SystemExit(1)
