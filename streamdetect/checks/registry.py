"""The checks this version runs, by name: one registration per check, no switches on names elsewhere.

Adding a check is its module (implementing :class:`~streamdetect.checks.protocol.Check`) plus one entry
here: its factory, its default threshold and whether it ties identifiers to sensitive values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from streamdetect.checks.k_anonymity import KAnonymity
from streamdetect.checks.linkage import Linkage
from streamdetect.checks.protocol import Check
from streamdetect.checks.publisher_side import PublisherSide
from streamdetect.checks.table_anonymity import TableAnonymity
from streamdetect.model.topology import Topology

#: ``build(topology, k, max_level)``: the check as the topology configures it, ``k`` overriding.
Build = Callable[[Topology, int | None, int | None], Check[Any, Any]]


def _k_anonymity(topology: Topology, k: int | None, max_level: int | None) -> KAnonymity:
    del max_level  # the join of all views: no closure levels
    return KAnonymity(topology, k)


@dataclass(frozen=True)
class Registration:
    """A check's factory and what the topology loader needs to know of it."""

    build: Build
    default_k: int = 2
    #: ties identifier values to sensitive ones, so the table must declare identifiers
    needs_identifiers: bool = False
    #: groups rows by quasi-identifiers, so the table must declare some
    needs_quasi_identifiers: bool = False
    #: the threshold's key in the topology (``checks: {l-diversity: {l: 3}}``)
    threshold: str = "k"


#: Every check, in report order.
REGISTRY: Mapping[str, Registration] = {
    "linkage": Registration(Linkage.from_topology, needs_identifiers=True),
    "k-anonymity": Registration(_k_anonymity, needs_identifiers=True),
    "sind": Registration(PublisherSide.sind),
    "rsind": Registration(PublisherSide.rsind),
    "table-k-anonymity": Registration(TableAnonymity.k_anonymity, needs_quasi_identifiers=True),
    "l-diversity": Registration(TableAnonymity.l_diversity, needs_quasi_identifiers=True, threshold="l"),
}
