"""Load and validate a topology YAML file into a :class:`~streamdetect.model.topology.Topology`.

Validation happens once, here, at the boundary; every error names the file, the key path
(``views[1].where``) and what is wrong, and nothing runs on a half-valid topology.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml

from streamdetect.checks.registry import REGISTRY, unmet_needs
from streamdetect.errors import PredicateError, TopologyError
from streamdetect.io import postgres
from streamdetect.model.hierarchies import Hierarchy, intervals, mapping, mask
from streamdetect.model.limits import MAX_K
from streamdetect.model.predicates import (
    Predicate,
    attributes_of,
    date_literal,
    literals_of,
    parse_predicate,
    predicate_text,
)
from streamdetect.model.sql_views import SqlView, view_from_sql
from streamdetect.model.topology import (
    ATTRIBUTE_TYPES,
    AttributeType,
    CheckConfig,
    FragmentationSpec,
    FunctionalDependency,
    MultivaluedDependency,
    TableSchema,
    Topology,
    ViewDefinition,
)
from streamdetect.model.visibility import VisibilityRequirement, attributes_in, parse_visibility

T = TypeVar("T")

_TOP_KEYS = {"name", "table", "views", "checks", "window", "fragmentation", "generalization"}
#: A ``window``: a positive number and a unit, seconds to weeks.
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_TABLE_KEYS = {
    "name",
    "attributes",
    "identifiers",
    "sensitive",
    "quasi_identifiers",
    "functional_dependencies",
    "multivalued_dependencies",
    "source",
    "topic",
}
_VIEW_KEYS = {"name", "attributes", "where", "sql", "source", "topic"}
#: Kafka's legal topic names.
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


class _Supported(Mapping[str, int]):
    """The checks this version implements, with their default threshold: a live view of the registry
    (a check registered later is supported too)."""

    def __getitem__(self, name: str) -> int:
        return REGISTRY[name].default_k

    def __iter__(self) -> Iterator[str]:
        return iter(REGISTRY)

    def __len__(self) -> int:
        return len(REGISTRY)


SUPPORTED_CHECKS: Mapping[str, int] = _Supported()


class _Context:
    """Carries the file name so that every error names it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, key: str | None, problem: str) -> TopologyError:
        return TopologyError(problem, file=str(self.path), key=key)

    def mapping(self, value: Any, key: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(key, f"expected a mapping, found {_kind(value)}")
        return value

    def known_keys(self, value: Mapping[str, Any], allowed: set[str], key: str) -> None:
        for name in value:
            if name not in allowed:
                raise self.fail(
                    f"{key}.{name}" if key else str(name),
                    f"unknown key; expected one of {', '.join(sorted(allowed))}",
                )

    def text(self, value: Any, key: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, f"expected a non-empty string, found {_kind(value)}")
        return value

    def names(self, value: Any, key: str, *, allow_empty: bool = True) -> tuple[str, ...]:
        if value is None and allow_empty:
            return ()
        if not isinstance(value, Sequence) or isinstance(value, str):
            raise self.fail(key, f"expected a list of attribute names, found {_kind(value)}")
        names = tuple(self.text(item, f"{key}[{i}]") for i, item in enumerate(value))
        if not names and not allow_empty:
            raise self.fail(key, "must not be empty")
        seen: set[str] = set()
        for i, name in enumerate(names):
            if name in seen:
                raise self.fail(f"{key}[{i}]", f"attribute {name!r} is listed twice")
            seen.add(name)
        return names

    def known_attributes(self, names: Sequence[str], attributes: Sequence[str], key: str) -> None:
        for i, name in enumerate(names):
            if name not in attributes:
                raise self.fail(f"{key}[{i}]", f"unknown attribute {name!r}; the table has {', '.join(attributes)}")


def _kind(value: Any) -> str:  # noqa: PLR0911 -- one short answer per YAML kind
    if value is None:
        return "nothing"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, bool):
        return f"the boolean {value}"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, Sequence):
        return "a list"
    return type(value).__name__


def _read_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TopologyError("no such file", file=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TopologyError(f"cannot read the file: {exc}", file=str(path)) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        line = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else None
        raise TopologyError(f"not valid YAML: {problem}", file=str(path), key=line) from None


def _resolve(ctx: _Context, value: Any, key: str) -> str:
    """A ``source``: a database URI as given (checked: no password in it), else a path relative to the file."""
    text = ctx.text(value, key)
    if postgres.is_database(text):
        problem = postgres.check_uri(text)
        if problem is not None:
            raise ctx.fail(key, problem)
        return text
    source = Path(text)
    return str(source if source.is_absolute() else (ctx.path.parent / source))


def _table(ctx: _Context, raw: Any) -> TableSchema:
    table = ctx.mapping(raw, "table")
    ctx.known_keys(table, _TABLE_KEYS, "table")
    if "attributes" not in table:
        raise ctx.fail("table.attributes", "missing")
    raw_attributes = table["attributes"]
    types: dict[str, AttributeType] = {}
    if isinstance(raw_attributes, Mapping):
        attributes = ctx.names(list(raw_attributes), "table.attributes", allow_empty=False)
        for name, declared in raw_attributes.items():
            if declared not in ATTRIBUTE_TYPES:
                raise ctx.fail(
                    f"table.attributes.{name}",
                    f"unknown type {declared!r}; expected one of {', '.join(ATTRIBUTE_TYPES)}",
                )
            types[name] = declared
    else:
        attributes = ctx.names(raw_attributes, "table.attributes", allow_empty=False)
    roles: dict[str, tuple[str, ...]] = {}
    for role in ("identifiers", "sensitive", "quasi_identifiers"):
        roles[role] = ctx.names(table.get(role), f"table.{role}")
        ctx.known_attributes(roles[role], attributes, f"table.{role}")
    if not roles["sensitive"]:
        raise ctx.fail("table.sensitive", "at least one attribute is needed")
    both = set(roles["identifiers"]) & set(roles["sensitive"])
    if both:
        raise ctx.fail("table.sensitive", f"{', '.join(sorted(both))} cannot be both identifier and sensitive")
    dependencies = _dependencies(ctx, table.get("functional_dependencies"), attributes)
    multivalued = _multivalued(ctx, table.get("multivalued_dependencies"), attributes)
    source = _resolve(ctx, table["source"], "table.source") if table.get("source") is not None else None
    name = ctx.text(table.get("name", "table"), "table.name")
    topic = _topic(ctx, table.get("topic"), "table.topic")
    return TableSchema(
        name=name,
        attributes=attributes,
        identifiers=roles["identifiers"],
        sensitive=roles["sensitive"],
        quasi_identifiers=roles["quasi_identifiers"],
        functional_dependencies=dependencies,
        multivalued_dependencies=multivalued,
        types=types,
        source=source,
        topic=topic,
    )


def _topic(ctx: _Context, raw: Any, key: str) -> str | None:
    """A ``topic:`` key: a legal Kafka topic name, or None when absent (the default name)."""
    topic = ctx.text(raw, key) if raw is not None else None
    if topic is not None and not _TOPIC.match(topic):
        raise ctx.fail(key, f"{topic!r} is not a Kafka topic name (letters, digits, '.', '_', '-')")
    return topic


def _dependencies(ctx: _Context, raw: Any, attributes: Sequence[str]) -> tuple[FunctionalDependency, ...]:
    return tuple(FunctionalDependency(lhs, rhs) for lhs, rhs in _sides(ctx, raw, attributes, "->"))


def _multivalued(ctx: _Context, raw: Any, attributes: Sequence[str]) -> tuple[MultivaluedDependency, ...]:
    return tuple(MultivaluedDependency(lhs, rhs) for lhs, rhs in _sides(ctx, raw, attributes, "->>"))


def _sides(
    ctx: _Context, raw: Any, attributes: Sequence[str], arrow: str
) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """``['A, B -> C']`` (or ``->>``): each dependency's two sides, attribute names checked."""
    kind = "functional_dependencies" if arrow == "->" else "multivalued_dependencies"
    if raw is None:
        return []
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise ctx.fail(f"table.{kind}", f"expected a list like ['A, B {arrow} C'], found {_kind(raw)}")
    dependencies = []
    for i, item in enumerate(raw):
        key = f"table.{kind}[{i}]"
        text = ctx.text(item, key)
        if text.count("->") != 1 or (arrow == "->") == ("->>" in text):
            raise ctx.fail(key, f"expected 'A, B {arrow} C', found {text!r}")
        sides = [tuple(part.strip() for part in side.split(",")) for side in text.split(arrow)]
        for side in sides:
            if not side or any(not part for part in side):
                raise ctx.fail(key, f"empty attribute name in {text!r}")
            for name in side:
                if name not in attributes:
                    raise ctx.fail(key, f"unknown attribute {name!r}")
        dependencies.append((sides[0], sides[1]))
    return dependencies


def _parsed(
    ctx: _Context,
    key: str,
    text: str,
    grammar: tuple[Callable[[str], T], Callable[[T], Iterable[str]]],
    table: TableSchema,
) -> T:
    """``text`` parsed by ``grammar`` (its parser and the attribute names of a tree), every attribute
    named checked against the table; a syntax error or an unknown attribute names ``key``."""
    parse, names = grammar
    try:
        tree = parse(text)
    except PredicateError as exc:
        raise ctx.fail(key, f"bad expression {text!r}: {exc}") from None
    for name in names(tree):
        if name not in table.attributes:
            raise ctx.fail(key, f"unknown attribute {name!r} in {text!r}")
    return tree


def _where(ctx: _Context, raw: Any, key: str, table: TableSchema) -> Predicate:
    text = ctx.text(raw, key)
    predicate = _parsed(ctx, key, text, (parse_predicate, attributes_of), table)
    _check_dates(ctx, key, predicate, table)
    return predicate


def _check_dates(ctx: _Context, key: str, predicate: Predicate, table: TableSchema) -> None:
    """Every literal a declared date attribute is compared with names a date (ISO 8601)."""
    for name, value in literals_of(predicate):
        if table.types.get(name) == "date" and isinstance(value, str):
            try:
                date_literal(value)
            except PredicateError as exc:
                raise ctx.fail(key, f"attribute {name!r} is a date: {exc}") from None


def _sql(ctx: _Context, raw: Any, key: str, table: TableSchema) -> SqlView:
    """A view given as ``sql: SELECT ... FROM <table> WHERE ...``: its projection and selection."""
    text = ctx.text(raw, key)
    try:
        view = view_from_sql(text, table.name, table.attributes, table.types)
    except PredicateError as exc:
        raise ctx.fail(key, str(exc)) from None
    if view.where is not None:
        _check_dates(ctx, key, view.where, table)
    return view


def _views(ctx: _Context, raw: Any, table: TableSchema) -> tuple[ViewDefinition, ...]:
    if not isinstance(raw, Sequence) or isinstance(raw, str) or not raw:
        raise ctx.fail("views", f"expected a non-empty list of views, found {_kind(raw)}")
    views: list[ViewDefinition] = []
    for i, item in enumerate(raw):
        key = f"views[{i}]"
        view = ctx.mapping(item, key)
        ctx.known_keys(view, _VIEW_KEYS, key)
        name = ctx.text(view.get("name"), f"{key}.name")
        if any(existing.name == name for existing in views):
            raise ctx.fail(f"{key}.name", f"view name {name!r} is used twice")
        sql, distinct = view.get("sql"), False
        if sql is not None:
            given = [part for part in ("attributes", "where") if part in view]
            if given:
                raise ctx.fail(f"{key}.{given[0]}", "a view given as sql takes its attributes and selection from it")
            declared = _sql(ctx, sql, f"{key}.sql", table)
            attributes, where, distinct = declared.attributes, declared.where, declared.distinct
            where_text = predicate_text(where) if where is not None else None
        else:
            if "attributes" not in view:
                raise ctx.fail(f"{key}.attributes", "missing (or give the view as sql)")
            attributes = ctx.names(view["attributes"], f"{key}.attributes", allow_empty=False)
            ctx.known_attributes(attributes, table.attributes, f"{key}.attributes")
            where_text = view.get("where")
            where = _where(ctx, where_text, f"{key}.where", table) if where_text is not None else None
        if view.get("source") is not None:
            source: str | None = _resolve(ctx, view["source"], f"{key}.source")
        elif table.source is None:
            raise ctx.fail(f"{key}.source", "missing, and there is no table.source to compute the view from")
        else:
            source = None
        topic = _topic(ctx, view.get("topic"), f"{key}.topic")
        views.append(ViewDefinition(name, attributes, where, where_text, source, topic, sql, distinct))
    return tuple(views)


def _checks(ctx: _Context, raw: Any) -> tuple[CheckConfig, ...]:
    if raw is None:
        return tuple(CheckConfig(name, entry.default_k) for name, entry in REGISTRY.items() if entry.default)
    checks = ctx.mapping(raw, "checks")
    configs = []
    for name, options in checks.items():
        key = f"checks.{name}"
        if name not in REGISTRY:
            raise ctx.fail(key, f"unknown check; this version supports {', '.join(REGISTRY)}")
        settings = {} if options is None else ctx.mapping(options, key)
        threshold = REGISTRY[name].threshold
        ctx.known_keys(settings, {threshold}, key)
        k = settings.get(threshold, REGISTRY[name].default_k)
        if not isinstance(k, int) or isinstance(k, bool) or not 2 <= k <= MAX_K:
            raise ctx.fail(f"{key}.{threshold}", f"expected a whole number from 2 to {MAX_K:,}, found {_kind(k)}")
        configs.append(CheckConfig(name, k))
    if not configs:
        raise ctx.fail("checks", "no check listed")
    return tuple(configs)


def load_topology(path: str | Path) -> Topology:
    """Read, validate and return the topology in ``path``.

    Raises :class:`~streamdetect.errors.TopologyError` naming the file, the key path and the problem.
    Data files are not read here (see :func:`streamdetect.io.sources.load_views`).
    """
    ctx = _Context(Path(path))
    document = ctx.mapping(_read_yaml(ctx.path), "(top level)")
    ctx.known_keys(document, _TOP_KEYS, "")
    if "table" not in document:
        raise ctx.fail("table", "missing")
    if "views" not in document:
        raise ctx.fail("views", "missing")
    table = _table(ctx, document["table"])
    views = _views(ctx, document["views"], table)
    checks = _checks(ctx, document.get("checks"))
    for key, problem in unmet_needs(table, [config.name for config in checks]):
        raise ctx.fail(key, problem)
    name = ctx.text(document.get("name", ctx.path.stem), "name")
    window = _window(ctx, document["window"]) if document.get("window") is not None else None
    raw = document.get("fragmentation")
    fragmentation = _fragmentation(ctx, raw, table) if raw is not None else None
    generalization = _generalization(ctx, document.get("generalization"), table)
    return Topology(
        name=name,
        table=table,
        views=views,
        checks=checks,
        path=str(ctx.path),
        window=window,
        fragmentation=fragmentation,
        generalization=generalization,
    )


def _generalization(ctx: _Context, raw: Any, table: TableSchema) -> dict[str, Hierarchy]:
    """``generalization: {Zip: mask, Country: {map: [{USA: North America}]}, Age: {intervals: [10, 20]}}``."""
    if raw is None:
        return {}
    spec = ctx.mapping(raw, "generalization")
    hierarchies: dict[str, Hierarchy] = {}
    for name, value in spec.items():
        key = f"generalization.{name}"
        if name not in table.attributes:
            raise ctx.fail(key, f"unknown attribute {name!r}; the table has {', '.join(table.attributes)}")
        if value == "mask":
            hierarchies[name] = mask()
            continue
        kinds = ctx.mapping(value, key)
        if len(kinds) != 1 or next(iter(kinds)) not in ("map", "mask", "intervals"):
            raise ctx.fail(key, "expected mask, {mask: N}, {map: [{value: parent}, ...]} or {intervals: [width, ...]}")
        kind, levels = next(iter(kinds.items()))
        if kind == "mask":
            hierarchies[name] = mask()
        elif kind == "intervals":
            if (
                not isinstance(levels, Sequence)
                or isinstance(levels, str)
                or not levels
                or not all(isinstance(w, (int, float)) and not isinstance(w, bool) and w > 0 for w in levels)
            ):
                raise ctx.fail(f"{key}.intervals", f"expected a list of positive widths, found {_kind(levels)}")
            hierarchies[name] = intervals(levels)
        else:
            if not isinstance(levels, Sequence) or isinstance(levels, str) or not levels:
                raise ctx.fail(f"{key}.map", f"expected a list of mappings value -> parent, found {_kind(levels)}")
            maps = [ctx.mapping(level, f"{key}.map[{i}]") for i, level in enumerate(levels)]
            hierarchies[name] = mapping([{str(child): str(parent) for child, parent in m.items()} for m in maps])
    return hierarchies


def _fragmentation(ctx: _Context, raw: Any, table: TableSchema) -> FragmentationSpec:
    """``fragmentation: {constraints: [[SSN], [Patient, Illness]], visibility: ["Patient OR ZIP"]}``."""
    spec = ctx.mapping(raw, "fragmentation")
    ctx.known_keys(spec, {"constraints", "visibility"}, "fragmentation")
    raw_constraints = spec.get("constraints") or []
    if not isinstance(raw_constraints, Sequence) or isinstance(raw_constraints, str):
        raise ctx.fail(
            "fragmentation.constraints", f"expected a list of attribute lists, found {_kind(raw_constraints)}"
        )
    constraints = []
    for i, item in enumerate(raw_constraints):
        key = f"fragmentation.constraints[{i}]"
        names = ctx.names(item, key, allow_empty=False)
        ctx.known_attributes(names, table.attributes, key)
        constraints.append(names)
    raw_visibility = spec.get("visibility") or []
    if not isinstance(raw_visibility, Sequence) or isinstance(raw_visibility, str):
        raise ctx.fail("fragmentation.visibility", f"expected a list of formulas, found {_kind(raw_visibility)}")
    requirements = []
    for i, item in enumerate(raw_visibility):
        key = f"fragmentation.visibility[{i}]"
        text = ctx.text(item, key)
        formula = _parsed(ctx, key, text, (parse_visibility, attributes_in), table)
        requirements.append(VisibilityRequirement(text, formula))
    return FragmentationSpec(tuple(constraints), tuple(requirements))


def duration_seconds(raw: object) -> float | None:
    """A duration such as ``30d``, ``12h``, ``15m`` or ``90s`` (weeks: ``w``) in seconds; None when ``raw``
    is not one."""
    match = _DURATION.match(raw) if isinstance(raw, str) else None
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)] if match else None


def _window(ctx: _Context, raw: Any) -> float:
    """``window: 30d``: seconds (s), minutes (m), hours (h), days (d) or weeks (w)."""
    seconds = duration_seconds(raw) or 0.0
    if seconds <= 0:
        raise ctx.fail("window", f"expected a duration such as 30d, 12h, 15m or 90s, found {raw!r}")
    return seconds
