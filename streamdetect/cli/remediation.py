"""Remediation commands: ``fragment`` (minimal correct fragmentation by SAT), ``loose`` (k-loose
associations between two fragments), ``dependencies`` (FDs, MVDs and K-MSDs in the table's rows) and
``anonymize`` (K-MSD and K-MSD-AG k-anonymization), and ``remediate`` (releases proposed and re-checked)."""

from __future__ import annotations

import json
import time
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

import click

from streamdetect.cli.errors import fail_cleanly
from streamdetect.errors import TopologyError

if TYPE_CHECKING:
    import polars as pl

    from streamdetect.engine import Report
    from streamdetect.model.topology import Topology
    from streamdetect.remediation.loose import Exposure, Grouping
    from streamdetect.remediation.proposals import Proposal

#: Tables up to this many rows get their exposure (section 6) computed; beyond, it is skipped.
EXPOSURE_ROWS = 2_000

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
    from rich.console import Console
    from rich.table import Table

    from streamdetect.io.topology_file import load_topology
    from streamdetect.remediation.fragmentation import minimal_fragmentation

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


LOOSE_EXIT_CODES = (
    "Exit codes: 0 a verified k-loose association (rows suppressed, if any, are named); 1 none could be "
    "made (every row suppressed); 2 bad input; 3 internal error, a bug (STREAMDETECT_DEBUG=1 shows the traceback)."
)


def _attributes(text: str, option: str, topology: Topology) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in topology.table.attributes]
    if not names or unknown:
        raise TopologyError(
            f"{option}: {'unknown attribute(s) ' + ', '.join(unknown) if unknown else 'no attribute given'}; "
            f"the table has {', '.join(topology.table.attributes)}",
            file=topology.path,
        )
    return names


def _fragments(model: Topology, left_text: str, right_text: str) -> tuple[list[str], list[str], list[tuple[str, ...]]]:
    """The two fragments' attributes and the constraints they cover together; refuses fragments that
    share an attribute or hold a constraint alone (not a safe fragmentation)."""
    left, right = _attributes(left_text, "--left", model), _attributes(right_text, "--right", model)
    if set(left) & set(right):
        raise TopologyError(f"--left and --right share {', '.join(sorted(set(left) & set(right)))}: fragments must not")
    constraints = model.fragmentation.constraints if model.fragmentation is not None else ()
    covered = [c for c in constraints if set(c) <= set(left) | set(right)]
    for c in covered:
        if set(c) <= set(left) or set(c) <= set(right):
            raise TopologyError(
                f"constraint {{{', '.join(c)}}} lies inside one fragment: the fragmentation is not safe "
                "(streamdetect fragment finds one that is)",
                file=model.path,
                key="fragmentation.constraints",
            )
    return left, right, covered


@click.command(epilog=LOOSE_EXIT_CODES)
@click.argument("topology", type=click.Path(path_type=Path))
@click.option("--left", "left_text", required=True, help="The left fragment's attributes, comma separated.")
@click.option("--right", "right_text", required=True, help="The right fragment's attributes, comma separated.")
@click.option("--k", type=click.IntRange(min=1), required=True, help="Privacy degree: every association hides in k.")
@click.option("--kl", type=click.IntRange(min=1), help="Left group size (with --kr; default: a balanced split of k).")
@click.option("--kr", type=click.IntRange(min=1), help="Right group size (kl * kr must be at least k).")
@click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), help="Write left.csv, right.csv, association.csv."
)
@click.option(
    "--delta-max",
    help="Largest increase of exposure allowed (section 6), e.g. 1/8: above it nothing is written, exit 1.",
)
@click.option("--exposure", "show_exposure", is_flag=True, help="Also give the per-class exposure tables (section 6).")
@click.option("--json", "as_json", is_flag=True, help="Print the fragments, the association and tuple_groups as JSON.")
@fail_cleanly
def loose(
    topology: Path,
    left_text: str,
    right_text: str,
    k: int,
    kl: int | None,
    kr: int | None,
    out: Path | None,
    delta_max: str | None,
    show_exposure: bool,
    as_json: bool,
) -> None:
    """Publish two fragments of the table (``table.source``) with group columns and a k-loose association
    between them (De Capitani di Vimercati et al., VLDB 2010, section 5): every row's left half hides
    among at least k right halves, none alike under the ``fragmentation.constraints`` the two fragments
    cover, and symmetrically. The grouping is verified (Definition 5.4) before it is printed."""
    from streamdetect.io.sources import load_data
    from streamdetect.io.topology_file import load_topology
    from streamdetect.remediation.loose import alike_keys, exposure, fragment_codes, greedy_grouping, verify

    model = load_topology(topology)
    left, right, covered = _fragments(model, left_text, right_text)
    k_left, k_right = _split(k, kl, kr)
    _, table = load_data(model, with_table=True)
    if table is None:
        raise TopologyError(
            "loose associations are made from the table's rows: set table.source", file=model.path, key="table.source"
        )
    left_codes, right_codes = fragment_codes(table, left, right, covered)
    left_keys, right_keys = alike_keys(left_codes, table.height), alike_keys(right_codes, table.height)
    grouping = greedy_grouping(left_keys, right_keys, k_left, k_right)
    problems = verify(grouping, left_keys, right_keys, k_left * k_right)
    if problems:  # never offered: the greedy is wrong if this happens
        raise AssertionError(f"the grouping made is not {k_left * k_right}-loose: {problems[:3]}")
    limit = _fraction(delta_max) if delta_max is not None else None
    if (limit is not None or show_exposure) and table.height > EXPOSURE_ROWS:
        raise TopologyError(
            f"exposure is computed for tables of at most {EXPOSURE_ROWS:,} rows; this one has {table.height:,}"
        )
    exposures = (
        [exposure(grouping, lc, rc) for lc, rc in zip(left_codes, right_codes, strict=True)]
        if table.height <= EXPOSURE_ROWS
        else None
    )
    increases = None if exposures is None else [str(e.increase) for e in exposures]
    too_exposed = limit is not None and exposures is not None and any(e.increase > limit for e in exposures)
    published = _published(table, left, right, grouping)
    if out is not None and not too_exposed:
        out.mkdir(parents=True, exist_ok=True)
        for name, frame in published.items():
            frame.write_csv(out / f"{name}.csv")
    body = _loose_document(grouping, published, covered, increases)
    if show_exposure and exposures is not None:
        body["exposure"] = _exposure_document(covered, exposures)
    if limit is not None:
        body["delta_max"] = str(limit)
        body["published"] = not too_exposed
    if as_json:
        click.echo(json.dumps(body, default=str))
    else:
        _print_loose(body, None if too_exposed else out)
        if too_exposed:
            click.echo(f"exposure rises by more than delta_max = {limit}: nothing written", err=True)
    if too_exposed or all(g is None for g in grouping.left):
        raise SystemExit(1)


def _split(k: int, kl: int | None, kr: int | None) -> tuple[int, int]:
    """``(kl, kr)`` as given (both, with a product of at least k), or k split evenly."""
    from streamdetect.remediation.loose import split_k

    if (kl is None) != (kr is None):
        raise TopologyError("give both --kl and --kr, or neither (k is then split evenly)")
    k_left, k_right = (kl, kr) if kl is not None and kr is not None else split_k(k)
    if k_left * k_right < k:
        raise TopologyError(f"--kl {k_left} x --kr {k_right} = {k_left * k_right} is less than --k {k}")
    return k_left, k_right


def _exposure_document(covered: list[tuple[str, ...]], exposures: list[Exposure]) -> dict[str, object]:
    """Per covered constraint, section 6's tables: alike classes (row numbers) and the probability of
    each class pair without and with the association, as fractions."""
    return {
        "+".join(c): {
            "left_classes": [list(rows) for rows in e.left_classes],
            "right_classes": [list(rows) for rows in e.right_classes],
            "without": [[str(p) for p in row] for row in e.without],
            "with": [[str(p) for p in row] for row in e.with_association],
        }
        for c, e in zip(covered, exposures, strict=True)
    }


def _fraction(text: str) -> Fraction:
    try:
        value = Fraction(text.strip())
    except (ValueError, ZeroDivisionError):
        raise TopologyError(f"--delta-max: expected a number or a fraction such as 1/8, found {text!r}") from None
    if not 0 <= value <= 1:
        raise TopologyError(f"--delta-max: a probability increase lies in [0, 1], found {text}")
    return value


def _published(table: pl.DataFrame, left: list[str], right: list[str], grouping: Grouping) -> dict[str, pl.DataFrame]:
    """The fragments with their group column ``G``, sorted by group then values (never in table order,
    which would give the association away), and the association A(G_l, G_r)."""
    import polars as pl

    groups = pl.DataFrame(
        {"G_l": list(grouping.left), "G_r": list(grouping.right)}, schema={"G_l": pl.Int64, "G_r": pl.Int64}
    )
    rows = pl.concat([table, groups], how="horizontal").filter(pl.col("G_l").is_not_null())
    return {
        "left": rows.select([*left, pl.col("G_l").alias("G")]).sort(["G", *left], nulls_last=True),
        "right": rows.select([*right, pl.col("G_r").alias("G")]).sort(["G", *right], nulls_last=True),
        "association": rows.select("G_l", "G_r").sort(["G_l", "G_r"]),
    }


def _loose_document(
    grouping: Grouping, published: dict[str, pl.DataFrame], covered: list[tuple[str, ...]], increases: list[str] | None
) -> dict[str, object]:

    def rows(frame: pl.DataFrame) -> list[list[object]]:
        return [list(row) for row in frame.iter_rows()]

    return {
        "k": grouping.k_left * grouping.k_right,
        "k_left": grouping.k_left,
        "k_right": grouping.k_right,
        "constraints": [list(c) for c in covered],
        "left": {"attributes": published["left"].columns, "rows": rows(published["left"])},
        "right": {"attributes": published["right"].columns, "rows": rows(published["right"])},
        "association": rows(published["association"]),
        "tuple_groups": [None if g is None else [g, h] for g, h in zip(grouping.left, grouping.right, strict=True)],
        "suppressed": [{"row": row, "reason": why} for row, why in grouping.suppressed],
        "verified": True,
        "exposure_increase": None
        if increases is None
        else dict(zip(("+".join(c) for c in covered), increases, strict=True)),
    }


def _print_loose(body: dict[str, object], out: Path | None) -> None:
    from rich.console import Console

    console = Console()
    left, right = body["left"], body["right"]
    assert isinstance(left, dict)
    assert isinstance(right, dict)
    groups = len({row[-1] for row in left["rows"]}), len({row[-1] for row in right["rows"]})
    console.print(
        f"{body['k']}-loose association ({body['k_left']}, {body['k_right']})-grouping: {groups[0]} left and "
        f"{groups[1]} right groups over {len(left['rows'])} rows; verified (Definition 5.4)"
    )
    suppressed = body["suppressed"]
    assert isinstance(suppressed, list)
    for entry in suppressed[:20]:
        console.print(f"  suppressed row {entry['row']}: {entry['reason']}")
    if len(suppressed) > 20:
        console.print(f"  ... and {len(suppressed) - 20} more suppressed (--json lists them all)")
    increase = body["exposure_increase"]
    if isinstance(increase, dict):
        for constraint, value in increase.items():
            console.print(
                f"  largest increase of exposure for {{{constraint}}}: {value} (publish only if delta_max >= it)"
            )
    if out is not None:
        console.print(f"wrote left.csv, right.csv and association.csv to {out}")


DEPENDENCIES_EXIT_CODES = (
    "Exit codes: 0 every dependency holds; 1 some does not; 2 bad input; 3 internal error, a bug "
    "(STREAMDETECT_DEBUG=1 shows the traceback)."
)


def _kmsd(text: str, model: Topology) -> tuple[list[str], list[str]]:
    if text.count("->") != 1 or "->>" in text:
        raise TopologyError(f"--kmsd: expected 'A, B -> C', found {text!r}")
    sides = [[part.strip() for part in side.split(",") if part.strip()] for side in text.split("->")]
    unknown = [name for side in sides for name in side if name not in model.table.attributes]
    if unknown or not all(sides):
        raise TopologyError(
            f"--kmsd {text!r}: {'unknown attribute(s) ' + ', '.join(unknown) if unknown else 'an empty side'}",
            file=model.path,
        )
    return sides[0], sides[1]


@click.command(epilog=DEPENDENCIES_EXIT_CODES)
@click.argument("topology", type=click.Path(path_type=Path))
@click.option("--kmsd", "kmsds", multiple=True, help="Also check the K-MSD 'A, B -> C' with --k (repeatable).")
@click.option("--k", type=click.IntRange(min=2), default=2, show_default=True, help="The k of the --kmsd checks.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@fail_cleanly
def dependencies(topology: Path, kmsds: tuple[str, ...], k: int, as_json: bool) -> None:
    """Check that the table's rows (``table.source``) obey the topology's functional and multivalued
    dependencies, and any K-MSD given (Huang et al. 2014, Definition 7: every (X, Y)-value at least k
    rows). A generalization that breaks an FD the data had is what K-MSD-AG avoids."""
    from rich.console import Console

    from streamdetect.io.sources import load_data
    from streamdetect.io.topology_file import load_topology
    from streamdetect.relational.dependencies import Verdict, functional, k_multiset, multivalued

    model = load_topology(topology)
    _, table = load_data(model, with_table=True)
    if table is None:
        raise TopologyError(
            "dependencies are checked in the table's rows: set table.source", file=model.path, key="table.source"
        )
    verdicts: list[tuple[str, Verdict]] = [
        ("functional", functional(table, fd.lhs, fd.rhs)) for fd in model.table.functional_dependencies
    ]
    verdicts += [("multivalued", multivalued(table, mvd.lhs, mvd.rhs)) for mvd in model.table.multivalued_dependencies]
    verdicts += [("k-multiset", k_multiset(table, *_kmsd(text, model), k)) for text in kmsds]
    if as_json:
        body = [
            {
                "kind": kind,
                "dependency": v.dependency,
                "holds": v.holds,
                "broken": v.broken,
                "examples": list(v.examples),
            }
            for kind, v in verdicts
        ]
        click.echo(json.dumps({"dependencies": body}, default=str))
    else:
        console = Console()
        if not verdicts:
            console.print(
                "no dependency declared (table.functional_dependencies, table.multivalued_dependencies) "
                "or given (--kmsd)"
            )
        for kind, verdict in verdicts:
            state = "[green]holds[/]" if verdict.holds else f"[red]broken by {verdict.broken} group(s)[/]"
            console.print(f"{kind} {verdict.dependency}: {state}")
            for example in verdict.examples:
                console.print(f"  e.g. {', '.join(f'{name}={value}' for name, value in example.items())}")
    if not all(verdict.holds for _, verdict in verdicts):
        raise SystemExit(1)


ANONYMIZE_EXIT_CODES = (
    "Exit codes: 0 a k-anonymous table written (re-checked: table-k-anonymity finds nothing, and with "
    "k-msd-ag every FD among the quasi-identifiers holds); 2 bad input; 3 internal error, a bug."
)


@click.command(epilog=ANONYMIZE_EXIT_CODES)
@click.argument("topology", type=click.Path(path_type=Path))
@click.option("--k", type=click.IntRange(min=2), required=True, help="Every quasi-identifier group at least k rows.")
@click.option("--algorithm", type=click.Choice(["k-msd", "k-msd-ag"]), default="k-msd-ag", show_default=True)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True, help="Where to write it.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@fail_cleanly
def anonymize(topology: Path, k: int, algorithm: str, out: Path, as_json: bool) -> None:
    """k-anonymize the table (``table.source``) on its quasi-identifiers by building k-multiset
    dependencies (Huang et al. 2014): K-MSD, or K-MSD-AG, which also keeps the functional dependencies
    among the quasi-identifiers. Values are generalized along the topology's ``generalization:``
    hierarchies (an attribute without one can only be suppressed to ``*``). Writes DIR/anonymized.csv
    and DIR/report.json; the result is re-checked before it is written."""
    import polars as pl
    from rich.console import Console

    from streamdetect.io.sources import load_data
    from streamdetect.io.topology_file import load_topology
    from streamdetect.relational.dependencies import functional
    from streamdetect.remediation.kmsd import information_loss, k_msd, k_msd_ag, prepare

    model = load_topology(topology)
    quasi = list(model.table.quasi_identifiers)
    if not quasi:
        raise TopologyError("no quasi-identifier to generalize", file=model.path, key="table.quasi_identifiers")
    _, table = load_data(model, with_table=True)
    if table is None:
        raise TopologyError(
            "anonymize generalizes the table's rows: set table.source", file=model.path, key="table.source"
        )
    if table.height < k:
        raise TopologyError(
            f"the table has {table.height} rows, fewer than k = {k}", file=model.path, key="table.source"
        )
    columns = {a: table.get_column(a).cast(pl.String).to_list() for a in quasi}
    generalized = prepare(columns, model.generalization)
    dependencies = [(fd.lhs, fd.rhs) for fd in model.table.functional_dependencies]
    order = k_msd_ag(generalized, quasi, k, dependencies) if algorithm == "k-msd-ag" else k_msd(generalized, quasi, k)
    result = table.with_columns(pl.Series(a, generalized.column(a), dtype=pl.String) for a in quasi)
    _recheck(model, result, quasi, k, algorithm)
    loss = information_loss(generalized, quasi)
    fds = {
        str(fd): {"before": functional(table, fd.lhs, fd.rhs).holds, "after": functional(result, fd.lhs, fd.rhs).holds}
        for fd in model.table.functional_dependencies
    }
    report = {
        "algorithm": algorithm,
        "k": k,
        "rows": table.height,
        "quasi_identifiers": quasi,
        "order": order,
        "generalization_distance": {a: {"max": m, "mean": mean} for a, (m, mean) in loss.distance.items()},
        "discernibility": loss.discernibility,
        "normalized_certainty_penalty": loss.ncp,
        "functional_dependencies": fds,
    }
    out.mkdir(parents=True, exist_ok=True)
    result.write_csv(out / "anonymized.csv")
    (out / "report.json").write_text(json.dumps(report, indent=2))
    if as_json:
        click.echo(json.dumps(report))
        return
    console = Console()
    console.print(
        f"{algorithm}, k = {k}: {table.height} rows, quasi-identifiers joined in the order {', '.join(order)}"
    )
    for a, (most, mean) in loss.distance.items():
        console.print(f"  {a}: generalization distance max {most}, mean {mean:.2f}")
    console.print(f"  discernibility {loss.discernibility:,}; normalized certainty penalty {loss.ncp:.3f}")
    for name, states in fds.items():
        before, after = ("holds" if states[when] else "broken" for when in ("before", "after"))
        console.print(f"  FD {name}: {before} before, {after} after")
    console.print(f"wrote {out / 'anonymized.csv'} and {out / 'report.json'}; re-checked: k-anonymous")


def _recheck(model: Topology, result: pl.DataFrame, quasi: list[str], k: int, algorithm: str) -> None:
    """Never write what the checks would flag: table-k-anonymity on the result finds nothing, and
    K-MSD-AG kept every FD among the quasi-identifiers that held before."""
    from streamdetect.checks.table.anonymity import TableAnonymity
    from streamdetect.model.batch import Batch
    from streamdetect.relational.dependencies import functional

    check = TableAnonymity(model, "table-k-anonymity", k)
    found = list(check.update(check.initialize(), Batch(table=result)).raised)
    if any(f.relation is None for f in found):
        raise AssertionError(f"the {algorithm} result is not {k}-anonymous: {found[0].to_dict()}")
    if algorithm == "k-msd-ag":
        for fd in model.table.functional_dependencies:
            if set(fd.lhs) <= set(quasi) and set(fd.rhs) & set(quasi) and not functional(result, fd.lhs, fd.rhs).holds:
                raise AssertionError(f"K-MSD-AG broke the FD {fd}")


REMEDIATE_EXIT_CODES = (
    "Exit codes: 0 nothing to remediate, or a proposal the checks find clean; 1 violations and no clean "
    "proposal; 2 bad input; 3 internal error, a bug."
)


@click.command(epilog=REMEDIATE_EXIT_CODES)
@click.argument("topology", type=click.Path(path_type=Path))
@click.option(
    "--k", type=click.IntRange(min=2), help="k of the proposals (default: the largest k the topology's checks use)."
)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), help="Write each clean proposal's rows here.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@fail_cleanly
def remediate(topology: Path, k: int | None, out: Path | None, as_json: bool) -> None:
    """For a topology whose checks find violations, propose releases (the table generalized by
    K-MSD-AG with its views recomputed; the minimal fragmentation with a k-loose association) and re-run
    every configured check on each: before and after findings, and the utility each costs. Only a
    proposal the checks find clean is called safe."""
    from streamdetect.engine import run_checks
    from streamdetect.io.sources import load_data
    from streamdetect.io.topology_file import load_topology
    from streamdetect.remediation.proposals import fragmented, generalized

    model = load_topology(topology)
    views, table = load_data(model, with_table=True)
    if table is None:
        raise TopologyError(
            "remediate proposes releases of the table's rows: set table.source", file=model.path, key="table.source"
        )
    degree = k or max((config.k for config in model.checks), default=2)
    before = run_checks(model, views, table=table)
    proposals = [] if not before.findings else [generalized(model, table, degree), fragmented(model, table, degree)]
    body = {
        "topology": model.name,
        "k": degree,
        "before": before.by_check(),
        "proposals": [_proposal_document(p) for p in proposals],
    }
    if out is not None:
        for proposal in proposals:
            if proposal.safe:
                where = out / proposal.kind
                where.mkdir(parents=True, exist_ok=True)
                for name, frame in proposal.views.items():
                    frame.write_csv(where / f"{name}.csv")
    if as_json:
        click.echo(json.dumps(body, default=str))
    else:
        _print_proposals(before, proposals, degree)
    if before.findings and not any(p.safe for p in proposals):
        raise SystemExit(1)


def _proposal_document(proposal: Proposal) -> dict[str, object]:
    return {
        "kind": proposal.kind,
        "description": proposal.description,
        "safe": proposal.safe,
        "after": proposal.report.by_check() if proposal.report is not None else None,
        "utility": proposal.utility,
        "reason": proposal.reason,
    }


def _print_proposals(before: Report, proposals: list[Proposal], k: int) -> None:
    from rich.console import Console

    console = Console()
    if not before.findings:
        console.print(f"no finding in {before.topology!r}: nothing to remediate")
        return
    counts = ", ".join(f"{name}: {n}" for name, n in before.by_check().items())
    console.print(f"{len(before.findings)} finding(s) now ({counts}); proposals at k = {k}, each re-checked:")
    for proposal in proposals:
        verdict = "[green]safe[/]" if proposal.safe else "[red]not safe[/]"
        console.print(f"\n{proposal.kind}: {proposal.description}: {verdict}")
        if proposal.reason:
            console.print(f"  {proposal.reason}")
        if proposal.report is not None:
            after = ", ".join(f"{name}: {n}" for name, n in proposal.report.by_check().items())
            console.print(f"  findings after: {len(proposal.report.findings)} ({after})")
        for name, value in proposal.utility.items():
            console.print(f"  {name}: {value}")
