"""The relational model of a publication: the private table's schema, the published views, the checks.

Pure data, validated by the loader at the boundary (:mod:`streamdetect.io.topology_file`); the checks
take these objects and polars frames and never touch files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import polars as pl

from streamdetect.errors import TopologyError
from streamdetect.model.hierarchies import Hierarchy
from streamdetect.model.predicates import Predicate, attributes_of, to_polars
from streamdetect.model.visibility import VisibilityRequirement

AttributeType = Literal["str", "int", "float", "date"]
ATTRIBUTE_TYPES: tuple[AttributeType, ...] = ("str", "int", "float", "date")
#: The largest threshold k accepted: far beyond any table's size, and within 32-bit counts.


@dataclass(frozen=True)
class FunctionalDependency:
    """``lhs -> rhs`` over attribute names of the table."""

    lhs: tuple[str, ...]
    rhs: tuple[str, ...]

    def __str__(self) -> str:
        return f"{', '.join(self.lhs)} -> {', '.join(self.rhs)}"


@dataclass(frozen=True)
class MultivaluedDependency:
    """``lhs ->> rhs`` over attribute names of the table (Huang et al. 2014, section 4.1)."""

    lhs: tuple[str, ...]
    rhs: tuple[str, ...]

    def __str__(self) -> str:
        return f"{', '.join(self.lhs)} ->> {', '.join(self.rhs)}"


@dataclass(frozen=True)
class TableSchema:
    """The private table: its attributes with their roles.

    ``types`` maps an attribute to its declared type, or omits it when the type is inferred from the data.
    ``source`` is the path of the table's rows, when the publisher gives them (what-if checks).
    ``topic`` is the Kafka topic its rows stream on (``None``: the default name, ``stream/topics.py``).
    """

    name: str
    attributes: tuple[str, ...]
    identifiers: tuple[str, ...]
    sensitive: tuple[str, ...]
    quasi_identifiers: tuple[str, ...] = ()
    functional_dependencies: tuple[FunctionalDependency, ...] = ()
    multivalued_dependencies: tuple[MultivaluedDependency, ...] = ()
    types: Mapping[str, AttributeType] = field(default_factory=dict)
    source: str | None = None
    topic: str | None = None


@dataclass(frozen=True)
class ViewDefinition:
    """A published view: ``PROJECT attributes (SELECT where (table))``.

    ``source`` is the path of its published rows; ``None`` means computed from the table's source.
    ``topic`` is the Kafka topic its rows stream on (``None``: the default name, ``stream/topics.py``).
    ``sql`` is the SQL text it was declared with, if any (``attributes`` and ``where`` are its translation,
    :mod:`streamdetect.model.sql_views`); ``distinct``: the view is a set of rows (``SELECT DISTINCT``), so a
    view computed from the table drops its repeated rows.
    """

    name: str
    attributes: tuple[str, ...]
    where: Predicate | None = None
    where_text: str | None = None
    source: str | None = None
    topic: str | None = None
    sql: str | None = None
    distinct: bool = False

    @property
    def selection_attributes(self) -> frozenset[str]:
        """Attributes the selection mentions (may lie outside the projection)."""
        return frozenset(attributes_of(self.where)) if self.where is not None else frozenset()

    def rows_from(self, table: pl.DataFrame) -> pl.DataFrame:
        """The view's rows computed from the table's: its selection (a row unknown on it, SQL's null, is
        not selected), its projection, and, for a set (``distinct``), each row once."""
        rows = table.filter(to_polars(self.where, table.schema).fill_null(False)) if self.where is not None else table
        rows = rows.select(self.attributes)
        return rows.unique(maintain_order=True) if self.distinct else rows


@dataclass(frozen=True)
class CheckConfig:
    """One configured check: its name and threshold ``k`` (disclosure when fewer than k values)."""

    name: str
    k: int


@dataclass(frozen=True)
class FragmentationSpec:
    """What a fragmentation must respect (De Capitani di Vimercati et al. 2010, sections 2-3):
    confidentiality constraints (attribute sets never visible together) and visibility requirements
    (monotonic formulas some fragment must satisfy)."""

    constraints: tuple[tuple[str, ...], ...]
    visibility: tuple[VisibilityRequirement, ...]


@dataclass(frozen=True)
class Topology:
    """A whole publication: the table, its views and the checks to run on them."""

    name: str
    table: TableSchema
    views: tuple[ViewDefinition, ...]
    #: The checks the topology lists (the loader puts the registry's default ones when it lists none).
    checks: tuple[CheckConfig, ...] = ()
    path: str | None = None
    #: Seconds of publication time within which rows can be joined (``window:``; None: no limit).
    #: Rows published ``window`` or more before the latest publication are withdrawn
    #: (:mod:`streamdetect.windowing`).
    window: float | None = None
    #: Constraints and requirements of ``streamdetect fragment`` (``fragmentation:``; None: not declared).
    fragmentation: FragmentationSpec | None = None
    #: Generalization hierarchies of quasi-identifiers, for ``streamdetect anonymize`` (``generalization:``).
    generalization: Mapping[str, Hierarchy] = field(default_factory=dict)

    def view(self, name: str) -> ViewDefinition:
        """The view called ``name`` (KeyError if none)."""
        for view in self.views:
            if view.name == name:
                return view
        raise KeyError(name)

    def check_config(self, name: str) -> CheckConfig | None:
        """The configuration of check ``name``, if the topology lists it."""
        for config in self.checks:
            if config.name == name:
                return config
        return None

    def threshold(self, name: str, override: int | None = None) -> int:
        """Check ``name``'s k: the override, else the configured one. A check neither configured nor given
        one has no threshold here: a run's plan gives it its registration's default
        (:func:`~streamdetect.check_plan.plan_checks`)."""
        if override is not None:
            return override
        config = self.check_config(name)
        if config is None:
            raise TopologyError(f"the {name} check is not configured and no threshold was given", file=self.path)
        return config.k
