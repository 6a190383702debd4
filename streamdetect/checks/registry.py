"""The checks this version runs, by name: one registration per check, no switches on names elsewhere.

Adding a check is its module (implementing :class:`~streamdetect.checks.protocol.Check`) plus one entry
here: where its factory is, its default threshold and whether it ties identifiers to sensitive values.

A registration names its factory as ``module:attribute`` (an entry point's form) and loads it on first
use, so reading the registry (the command line's choices, the topology loader's defaults) imports no
check and none of the libraries the checks compute with.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from importlib.metadata import EntryPoint
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamdetect.checks.protocol import Check
    from streamdetect.model.topology import Topology

#: ``build(topology, k, max_level)``: the check as the topology configures it, ``k`` overriding.
Build = Callable[["Topology", int | None, int | None], "Check[Any, Any]"]


@dataclass(frozen=True)
class Registration:
    """A check's factory and what the topology loader needs to know of it."""

    #: the factory, ``module:attribute`` (loaded on first use)
    factory: str
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

    @cached_property
    def _build(self) -> Build:
        built: Build = EntryPoint(name="", value=self.factory, group="streamdetect.checks").load()
        return built

    def build(self, topology: Topology, k: int | None, max_level: int | None) -> Check[Any, Any]:
        """The check as ``topology`` configures it, ``k`` overriding its threshold."""
        return self._build(topology, k, max_level)


#: Every check, in report order.
REGISTRY: Mapping[str, Registration] = {
    "linkage": Registration(
        "streamdetect.checks.linkage:Linkage.from_topology", needs_identifiers=True, keeps_rows=True
    ),
    "k-anonymity": Registration("streamdetect.checks.k_anonymity:KAnonymity.from_topology", needs_identifiers=True),
    "sind": Registration("streamdetect.checks.publisher_side:PublisherSide.sind"),
    "rsind": Registration("streamdetect.checks.publisher_side:PublisherSide.rsind"),
    "table-k-anonymity": Registration(
        "streamdetect.checks.table_anonymity:TableAnonymity.k_anonymity", needs_quasi_identifiers=True
    ),
    "l-diversity": Registration(
        "streamdetect.checks.table_anonymity:TableAnonymity.l_diversity", needs_quasi_identifiers=True, threshold="l"
    ),
}

#: The checks' names, in report order.
CHECKS: tuple[str, ...] = tuple(REGISTRY)
