"""The checks this version runs, by name: one registration per check, no switches on names elsewhere.

Adding a check is its package (a check implementing :class:`~streamdetect.checks.protocol.Check`, its
findings deriving from :class:`~streamdetect.checks.findings.Finding`, a function laying out its section
of a report, one explaining a finding) plus one entry here. ``tests/unit/test_toy_check.py`` registers
a toy check that way and sees it in every report format, ``explain``, the Detector and the metrics.

A registration names each part as ``module:attribute`` (an entry point's form) and loads it on first
use, so reading the registry (the command line's choices, the topology loader's defaults) imports no
check and none of the libraries the checks compute with.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from importlib.metadata import EntryPoint
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamdetect.checks.explanations import Explain
    from streamdetect.checks.presentation import Render
    from streamdetect.checks.protocol import Check
    from streamdetect.model.topology import TableSchema, Topology

#: ``build(topology, k, max_level)``: the check as the topology configures it, ``k`` overriding.
Build = Callable[["Topology", int | None, int | None], "Check[Any, Any]"]


def _load(reference: str) -> Any:
    """The object a ``module:attribute`` reference names (imported now)."""
    return EntryPoint(name="", value=reference, group="streamdetect.checks").load()


@dataclass(frozen=True)
class Registration:
    """Everything a check brings, each part named as ``module:attribute`` and loaded on first use: its
    factory, the section of a report its findings make, the explanation of one finding; and what the
    topology loader needs to know of it (its default threshold and the attributes it needs)."""

    #: the factory, ``build(topology, k, max_level)``
    factory: str
    #: its section of a report, ``render(summary, findings, shown)``
    section: str
    #: the rows behind one finding, ``explain(topology, views, table, finding)``
    explain: str
    default_k: int = 2
    #: ties identifier values to sensitive ones, so the table must declare identifiers
    needs_identifiers: bool = False
    #: groups rows by quasi-identifiers, so the table must declare some
    needs_quasi_identifiers: bool = False
    #: the threshold's key in the topology (``checks: {l-diversity: {l: 3}}``)
    threshold: str = "k"
    #: its state keeps every view's rows and the closure's channels
    #: (:class:`~streamdetect.checks.protocol.KeepsRows`): the universal-relation stream follows it
    keeps_rows: bool = False
    #: run when a topology lists no checks
    default: bool = False

    @cached_property
    def _build(self) -> Build:
        built: Build = _load(self.factory)
        return built

    @cached_property
    def render(self) -> Render:
        """Its section of a report (:mod:`streamdetect.checks.presentation`)."""
        render: Render = _load(self.section)
        return render

    @cached_property
    def explainer(self) -> Explain:
        """The rows behind one of its findings (:mod:`streamdetect.checks.explanations`)."""
        explain: Explain = _load(self.explain)
        return explain

    def build(self, topology: Topology, k: int | None, max_level: int | None) -> Check[Any, Any]:
        """The check as ``topology`` configures it, ``k`` overriding its threshold."""
        return self._build(topology, k, max_level)


#: Every check, in report order.
REGISTRY: Mapping[str, Registration] = {
    "linkage": Registration(
        "streamdetect.checks.linkage:Linkage.from_topology",
        "streamdetect.checks.linkage.report:section",
        "streamdetect.checks.explanations:explain_linkage",
        needs_identifiers=True,
        keeps_rows=True,
        default=True,
    ),
    "k-anonymity": Registration(
        "streamdetect.checks.k_anonymity.adapter:KAnonymity.from_topology",
        "streamdetect.checks.k_anonymity.adapter:section",
        "streamdetect.checks.explanations:explain_cover",
        needs_identifiers=True,
    ),
    "sind": Registration(
        "streamdetect.checks.indistinguishability.adapter:PublisherSide.sind",
        "streamdetect.checks.indistinguishability.adapter:section",
        "streamdetect.checks.explanations:explain_sind",
    ),
    "rsind": Registration(
        "streamdetect.checks.indistinguishability.adapter:PublisherSide.rsind",
        "streamdetect.checks.indistinguishability.adapter:section",
        "streamdetect.checks.explanations:explain_sind",
    ),
    "table-k-anonymity": Registration(
        "streamdetect.checks.table.anonymity:TableAnonymity.k_anonymity",
        "streamdetect.checks.table.anonymity:section",
        "streamdetect.checks.explanations:explain_group",
        needs_quasi_identifiers=True,
    ),
    "l-diversity": Registration(
        "streamdetect.checks.table.anonymity:TableAnonymity.l_diversity",
        "streamdetect.checks.table.anonymity:section",
        "streamdetect.checks.explanations:explain_group",
        needs_quasi_identifiers=True,
        threshold="l",
    ),
}


def unmet_needs(table: TableSchema, names: Sequence[str]) -> list[tuple[str, str]]:
    """What the checks ``names`` need of the table's roles and it does not declare, as (key, problem): the
    one rule the topology loader and a run's plan both apply."""
    problems = []
    needing = [name for name in names if REGISTRY[name].needs_identifiers]
    if needing and not table.identifiers:
        free = [
            name for name, entry in REGISTRY.items() if not (entry.needs_identifiers or entry.needs_quasi_identifiers)
        ]
        alone = f" ({' and '.join(free)} alone need none)" if free else ""
        problems.append(
            ("table.identifiers", f"at least one attribute is needed by the {' and '.join(needing)} check(s){alone}")
        )
    grouping = [name for name in names if REGISTRY[name].needs_quasi_identifiers]
    if grouping and not table.quasi_identifiers:
        problems.append(
            (
                "table.quasi_identifiers",
                f"at least one attribute is needed by the {' and '.join(grouping)} check(s): they group rows by them",
            )
        )
    return problems


#: The checks' names, in report order.
CHECKS: tuple[str, ...] = tuple(REGISTRY)
