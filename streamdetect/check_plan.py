"""What a run decides from a topology before it reads a row, decided once: which checks run (validated
against the table's roles), each built from its registration, whether and why the private table is read,
how the checks split across partitions, and the fingerprint a state is kept under. ``check``, the API,
the Detector, the engine and the partitioning all take one :class:`CheckPlan`."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType
from typing import Any

from streamdetect.checks.protocol import BY_IDENTIFIER_VALUE, BY_PAIR, BY_SENSITIVE, Check, Narrows
from streamdetect.checks.registry import REGISTRY, unmet_needs
from streamdetect.errors import TopologyError
from streamdetect.model.topology import Topology

#: Version of the snapshot envelope (each check's state carries its own version inside).
SNAPSHOT_VERSION = 1


def checks_to_run(topology: Topology, checks: Sequence[str] | None = None) -> list[str]:
    """The checks a run performs: those asked for, else those the topology lists.

    Raises :class:`TopologyError` for an unknown check, or when a check that ties identifiers to
    sensitive values is asked for on a table that declares no identifier (the loader refuses the same for
    the checks a topology lists; this is for the ones asked for).
    """
    names = list(checks) if checks else [config.name for config in topology.checks]
    unknown = [name for name in names if name not in REGISTRY]
    if unknown:
        raise TopologyError(f"unknown check(s) {', '.join(unknown)}; this version runs {', '.join(REGISTRY)}")
    for key, problem in unmet_needs(topology.table, names):
        raise TopologyError(problem, file=topology.path, key=key)
    return names


@dataclass(frozen=True)
class CheckPlan:
    """The checks of one run, built, and what follows from them (module docstring). Frozen: built by
    :func:`plan_checks`, then only read."""

    topology: Topology
    #: Each check by name, in report order, built with the run's threshold override and closure bound.
    checks: Mapping[str, Check[Any, Any]]
    max_level: int | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """The checks, in report order."""
        return tuple(self.checks)

    @cached_property
    def table_readers(self) -> tuple[str, ...]:
        """The checks that read the private table's rows."""
        return tuple(name for name, check in self.checks.items() if check.properties.needs_table)

    @property
    def needs_table(self) -> bool:
        """Whether the run reads the private table."""
        return bool(self.table_readers)

    def table_refusal(self) -> TopologyError | None:
        """Why the run cannot go without the private table's rows (the first check that reads them, and
        why it does), or None when none reads them."""
        if not self.table_readers:
            return None
        name = self.table_readers[0]
        why = self.checks[name].properties.table_reason
        problem = f"the {name} check needs the private table's rows{f' ({why})' if why else ''}: set table.source"
        return TopologyError(problem, file=self.topology.path, key="table.source")

    @cached_property
    def split(self) -> tuple[str, ...]:
        """The checks whose state splits by identifier value across partitions."""
        return tuple(name for name, check in self.checks.items() if check.properties.partition == BY_IDENTIFIER_VALUE)

    @cached_property
    def by_pair(self) -> tuple[str, ...]:
        """The checks whose findings split by (identifier, sensitive) pair, each pair a piece of its own."""
        return tuple(name for name, check in self.checks.items() if check.properties.partition == BY_PAIR)

    @cached_property
    def by_sensitive(self) -> tuple[str, ...]:
        """The checks whose findings split by sensitive attribute, each attribute a piece of its own."""
        return tuple(name for name, check in self.checks.items() if check.properties.partition == BY_SENSITIVE)

    @cached_property
    def whole(self) -> tuple[str, ...]:
        """The checks whose state is one piece."""
        parted = {*self.split, *self.by_pair, *self.by_sensitive}
        return tuple(name for name in self.checks if name not in parted)

    def narrowed(self, name: str, sensitive: str) -> CheckPlan:
        """The plan of check ``name`` alone, narrowed to ``sensitive`` (a check split by sensitive attribute)."""
        check = self.checks[name]
        if not isinstance(check, Narrows):
            raise TypeError(f"the {name} check does not split by sensitive attribute")
        return CheckPlan(self.topology, MappingProxyType({name: check.narrowed(sensitive)}), self.max_level)

    @cached_property
    def unwithdrawable(self) -> tuple[str, ...]:
        """The checks that refuse withdrawn rows."""
        return tuple(name for name, check in self.checks.items() if not check.properties.retractions)

    @cached_property
    def fingerprint(self) -> str:
        """A hash of everything a state depends on: schema, views, checks and thresholds, closure bound."""
        topology = self.topology
        table = topology.table
        document = {
            "snapshot": SNAPSHOT_VERSION,
            "table": {
                "attributes": list(table.attributes),
                "identifiers": list(table.identifiers),
                "sensitive": list(table.sensitive),
                "functional_dependencies": [str(fd) for fd in table.functional_dependencies],
                "types": dict(table.types),
            },
            # A set view (SELECT DISTINCT) says so; a bag view keeps the entry states were keyed by before.
            "views": [
                [view.name, list(view.attributes), view.where_text, *(["distinct"] if view.distinct else [])]
                for view in topology.views
            ],
            "checks": [[name, check.k] for name, check in self.checks.items()],
            "max_level": self.max_level,
        }
        if topology.window is not None:  # absent otherwise: states kept without a window keep their fingerprint
            document["window"] = topology.window
        canonical = json.dumps(document, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def plan_checks(
    topology: Topology, checks: Sequence[str] | None = None, *, k: int | None = None, max_level: int | None = None
) -> CheckPlan:
    """The plan of a run of ``checks`` (default: the topology's), ``k`` overriding every threshold and
    ``max_level`` bounding the closure. Raises :class:`TopologyError` as :func:`checks_to_run` does."""
    names = checks_to_run(topology, checks)
    built = {name: REGISTRY[name].build(topology, _threshold(topology, name, k), max_level) for name in names}
    return CheckPlan(topology, MappingProxyType(built), max_level)


def _threshold(topology: Topology, name: str, k: int | None) -> int | None:
    """The threshold a check is built with: the override, else the topology's (None: the check reads it),
    else its registration's default (a check asked for that the topology does not list)."""
    if k is not None or topology.check_config(name) is not None:
        return k
    return REGISTRY[name].default_k


def table_readers(topology: Topology, checks: Sequence[str] | None = None) -> list[str]:
    """The checks of a run (:func:`checks_to_run`) that read the private table's rows."""
    return list(plan_checks(topology, checks).table_readers)
