"""The registered checks run as ``check`` and the worker run them: k-anonymity through the Detector, which
picks the method for the topology (the property tests of each method also call the method directly), and
linkage as one batch."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import polars as pl

from streamdetect.checks.findings import LinkageFinding
from streamdetect.checks.linkage import LinkageCheck, finding_order
from streamdetect.detector import Detector
from streamdetect.model.batch import Batch
from streamdetect.model.topology import CheckConfig, FunctionalDependency, TableSchema, Topology, ViewDefinition


def k_anonymity_covers(
    attributes: Sequence[str],
    identifier: str,
    sensitive: str,
    views: Sequence[ViewDefinition],
    frames: Mapping[str, pl.DataFrame],
    k: int,
    *,
    dependencies: Sequence[FunctionalDependency] = (),
    table: pl.DataFrame | None = None,
    present_only: bool = False,
) -> set[tuple[Any, frozenset[Any]]]:
    """(identifier value, sensitive values) of every cover found. Every view's frame is given, empty ones
    included, as ``check`` gives them; with ``present_only``, as a stream gives them: only the views that
    have rows (the others have published nothing yet)."""
    schema = TableSchema(
        "T",
        tuple(attributes),
        (identifier,),
        (sensitive,),
        functional_dependencies=tuple(dependencies),
        source="table" if table is not None else None,
    )
    topology = Topology("random", schema, tuple(views), (CheckConfig("k-anonymity", k),))
    detector = Detector(topology)
    given = {name: frame for name, frame in frames.items() if frame.height or not present_only}
    detector.update(Batch(views=given, table=table))
    return {(f.identifier_value, frozenset(f.sensitive_values)) for f in detector.findings()}


def run_linkage(
    check: LinkageCheck, views: Mapping[str, pl.DataFrame], progress: Callable[[int, int], None] | None = None
) -> list[LinkageFinding]:
    """The linkage check as a batch: one update with every row, then its findings in report order (from an
    empty state every finding of the result is raised by this one update)."""
    state = check.initialize()
    return sorted(check.update(state, views, progress).raised, key=finding_order)
