"""The Kafka topics of a topology: one per published view, the private table's, the findings, the dead letters."""

from __future__ import annotations

import re

from streamdetect.model.topology import Topology, ViewDefinition
from streamdetect.stream.records import FINDINGS_MAX_BYTES

_ILLEGAL = re.compile(r"[^A-Za-z0-9._-]")


def _prefix(topology: Topology) -> str:
    # A topology's name may hold characters a topic name cannot (a space): those become '_'.
    return f"streamdetect.{_ILLEGAL.sub('_', topology.name)}"


def view_topic(topology: Topology, view: ViewDefinition) -> str:
    """The view's ``topic``, else ``streamdetect.<topology>.view.<view>``."""
    return view.topic or f"{_prefix(topology)}.view.{_ILLEGAL.sub('_', view.name)}"


def table_topic(topology: Topology) -> str:
    """Where the private table's rows stream, for the checks that read it: the table's ``topic``, else
    ``streamdetect.<topology>.table``."""
    return topology.table.topic or f"{_prefix(topology)}.table"


def changes_prefix(topology: Topology) -> str:
    """The prefix of the topics Debezium writes the private table's changes to (``streamdetect connect``):
    ``streamdetect.<topology>.changes``, the table's topic being ``<prefix>.<schema>.<table>``."""
    return f"{_prefix(topology)}.changes"


def findings_topic(topology: Topology) -> str:
    """Where raised and cleared findings go: ``streamdetect.<topology>.findings``."""
    return f"{_prefix(topology)}.findings"


def dead_letter_topic(topology: Topology) -> str:
    """Where records that cannot be read go, with the reason: ``streamdetect.<topology>.dead-letters``."""
    return f"{_prefix(topology)}.dead-letters"


def route_topic(topology: Topology) -> str:
    """Where a worker that shares its work sends each unit's rows: ``streamdetect.<topology>.route``."""
    return f"{_prefix(topology)}.route"


def universal_topic(topology: Topology) -> str:
    """Where the worker writes the universal-relation stream (``--universal-rows``):
    ``streamdetect.<topology>.universal``."""
    return f"{_prefix(topology)}.universal"


def topic_configs(topology: Topology) -> dict[str, dict[str, str]]:
    """The configuration streamdetect creates its output topics with (docs/streaming.md, "Topics"), and
    an operator who creates them by hand must give them: the findings topic holds the open findings for as
    long as the deployment lives (compacted by finding id: the latest event of each, a tombstone when one
    clears; never deleted by retention) and takes records up to the size of a large class's event; the
    dead-letter topic keeps one letter per record read (compacted by the letter's key)."""
    return {
        findings_topic(topology): {"cleanup.policy": "compact", "max.message.bytes": str(FINDINGS_MAX_BYTES)},
        dead_letter_topic(topology): {"cleanup.policy": "compact"},
    }
