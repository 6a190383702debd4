"""The linkage check: its configuration and what it is made of, tasks < saturation < projections <
results < updates (one module each, each building on the one before)."""

from __future__ import annotations

from dataclasses import dataclass

from streamdetect.checks.linkage.state import (
    LinkageState,
)
from streamdetect.checks.linkage.update import _Updates
from streamdetect.model.topology import Topology


@dataclass(frozen=True)
class LinkageCheck(_Updates):
    """Configuration of the linkage check over a set of views; stateless, the state is separate.

    ``max_level`` bounds the closure (None: every level). ``few_codes``: how many codes a task may keep
    open and still take a step that adds to several of its views as one whole-set run
    (:meth:`_few_codes`; 0: always one delta join per view). Only the work depends on it.

    Its parts build on one another, each a module: the tasks of the closure (and the fields), liveness
    and saturation, the projections a task joins, the results, the updates.
    """

    @classmethod
    def from_topology(cls, topology: Topology, k: int | None = None, max_level: int | None = None) -> LinkageCheck:
        """The check as the topology configures it; ``k`` overrides the configured threshold."""
        threshold = topology.threshold("linkage", k)
        return cls(
            views=topology.views,
            identifiers=topology.table.identifiers,
            sensitive=topology.table.sensitive,
            attribute_order=topology.table.attributes,
            k=threshold,
            max_level=max_level,
        )

    def initialize(self) -> LinkageState:
        """An empty state: no rows seen."""
        return LinkageState()
