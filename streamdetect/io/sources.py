"""Read the published rows of every view (CSV or Parquet) into polars frames with one type per attribute.

Reading never changes a value:

* a declared attribute type (``table.attributes`` as a mapping) is enforced strictly, and a cell that does
  not parse is an error naming the file, the column and the row; dates are ISO 8601 (``YYYY-MM-DD``) only;
* a Parquet column keeps its schema type (a string column stays text, whatever its values look like);
* an undeclared attribute read from CSV is text unless *every* value in *every* file round-trips exactly
  through the inferred type: ``42`` may become an integer, but ``07``, ``0042``, ``02135`` and ``1.50``
  keep the column text (as integers ``07`` and ``7`` would merge, and ZIP ``02135`` would join ``2135``);
  an attribute that a ``where`` compares with a string literal is text too;
* one type per attribute across every file that holds it, so that join columns agree across views.

Every published row must satisfy its view's ``where`` (the parts of it over the view's own attributes):
the checks reason about the view as defined, so a row that contradicts the definition is bad input.

A view with no ``source`` is computed from ``table.source``: its selection, then its projection,
duplicates kept (SQL bag semantics) unless it is declared ``SELECT DISTINCT``; a published file of a
``DISTINCT`` view must not repeat a row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from streamdetect.engine import ProgressFactory
from streamdetect.errors import PredicateError, TopologyError
from streamdetect.io import postgres
from streamdetect.model.predicates import And, Predicate, attributes_of, check_types, literals_of, to_polars
from streamdetect.model.topology import AttributeType, Topology, ViewDefinition

DTYPES: Mapping[AttributeType, pl.DataType] = {
    "str": pl.String(),
    "int": pl.Int64(),
    "float": pl.Float64(),
    "date": pl.Date(),
}
#: ISO 8601 calendar dates, the only date form read (``05/03/1995`` is ambiguous between day and month first).
ISO_DATE = r"^\d{4}-\d{2}-\d{2}$"
#: Rows named in an error about rows that contradict their view's ``where``.
_ROWS_SHOWN = 5


@dataclass(frozen=True)
class _File:
    """One data file as read: its path and its raw frame."""

    path: str
    frame: pl.DataFrame

    @property
    def untyped(self) -> bool:
        """CSV carries no types: its cells are text to be read, not values with a schema type."""
        return Path(self.path).suffix.lower() == ".csv"


def _read(path: str, key: str) -> pl.DataFrame:
    suffix = Path(path).suffix.lower()
    try:
        if suffix == ".csv":
            return pl.read_csv(path, infer_schema=False)
        if suffix in (".parquet", ".pq"):
            return pl.read_parquet(path)
    except FileNotFoundError:
        raise TopologyError(f"no such file (named by {key})", file=path) from None
    except (OSError, pl.exceptions.PolarsError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TopologyError(f"cannot read the file (named by {key}): {first_line}", file=path) from None
    raise TopologyError(f"unsupported file type {suffix!r} (named by {key}); expected .csv or .parquet", file=path)


def _check_columns(frame: pl.DataFrame, expected: tuple[str, ...], path: str, key: str) -> None:
    missing = [name for name in expected if name not in frame.columns]
    if missing:
        raise TopologyError(
            f"column(s) {', '.join(map(repr, missing))} of {key} missing from the file "
            f"(it has {', '.join(map(repr, frame.columns))})",
            file=path,
        )
    extra = [name for name in frame.columns if name not in expected]
    if extra:
        raise TopologyError(
            f"the file publishes column(s) {', '.join(map(repr, extra))} that {key} does not list; "
            "add them to the view's attributes (they are released) or drop them from the file",
            file=path,
        )


def _parse_text(source: pl.Series, dtype: pl.DataType) -> pl.Series:
    """Text cells parsed into ``dtype``; a cell that does not parse becomes null (callers compare nulls)."""
    text = source.str.strip_chars()
    if dtype == pl.Date():
        iso = text.zip_with(text.str.contains(ISO_DATE).fill_null(False), pl.Series([None], dtype=pl.String()))
        return iso.str.to_date("%Y-%m-%d", strict=False)
    return text.cast(dtype, strict=False)


def _cast(frame: pl.DataFrame, column: str, dtype: pl.DataType, path: str) -> pl.DataFrame:
    """Cast one column to ``dtype``, strictly: the first cell that does not fit is an error naming its row."""
    source = frame.get_column(column)
    if source.dtype == dtype:
        return frame
    if source.dtype == pl.String():
        converted = _parse_text(source, dtype)
    else:
        try:
            converted = source.cast(dtype, strict=True)
        except pl.exceptions.PolarsError:
            converted = source.cast(dtype, strict=False)
    failed = converted.is_null() & source.is_not_null()
    if failed.any():
        row = int(failed.arg_max() or 0)
        hint = " (dates are ISO 8601, YYYY-MM-DD)" if dtype == pl.Date() else ""
        raise TopologyError(
            f"column {column!r}, row {row + 1}: value {source[row]!r} is not of type {dtype}{hint}", file=path
        )
    return frame.with_columns(converted.alias(column))


def _round_trips(series: pl.Series, dtype: pl.DataType) -> bool:
    """Whether every text cell is exactly the canonical text of its value in ``dtype`` (nothing is lost)."""
    values = series.drop_nulls().unique()
    as_int = values.cast(pl.Int64, strict=False)
    if dtype == pl.Int64():
        return bool((as_int.cast(pl.String) == values).fill_null(False).all())
    as_float = values.cast(pl.Float64, strict=False)
    exact = (as_float.cast(pl.String) == values) | (as_int.cast(pl.String) == values)
    # "2" and "2.0" both read back exactly but are one float: distinct texts must stay distinct values.
    return bool(exact.fill_null(False).all()) and as_float.n_unique() == values.n_unique()


def _numeric_family(dtype: pl.DataType) -> pl.DataType | None:
    if dtype.is_integer():
        return pl.Int64()
    if dtype.is_float():
        return pl.Float64()
    return None


def _infer(
    files: Sequence[_File], column: str, compared_with_text: bool, compared_with: pl.DataType | None = None
) -> pl.DataType:
    """The one type of an undeclared attribute across every file that holds it (module docstring);
    ``compared_with``: the numeric type of the numbers a ``where`` compares it with, which decides when no
    file read holds a value of it (it is in no file, or only in files with no rows)."""
    holders = [(file, file.frame.get_column(column)) for file in files if column in file.frame.columns]
    typed = {file.path: series.dtype for file, series in holders if series.dtype != pl.String()}
    parquet_text = [file.path for file, series in holders if series.dtype == pl.String() and not file.untyped]
    if typed:
        families = {_numeric_family(dtype) or dtype for dtype in typed.values()}
        if len(families) > 1 and all(family.is_numeric() for family in families):
            families = {pl.Float64()}
        if len(families) > 1 or parquet_text:
            found = [f"{dtype} in {path}" for path, dtype in typed.items()] + [f"String in {p}" for p in parquet_text]
            raise TopologyError(
                f"attribute {column!r} has different types in different files ({'; '.join(found)}); "
                "declare its type in table.attributes",
            )
        return next(iter(families))
    if parquet_text or compared_with_text:
        return pl.String()
    texts = [series for _, series in holders]
    whole = pl.concat(texts) if texts else pl.Series([], dtype=pl.String())
    if compared_with is not None and whole.drop_nulls().len() == 0:
        return compared_with
    for candidate in (pl.Int64(), pl.Float64()):
        if whole.drop_nulls().len() > 0 and _round_trips(whole, candidate):
            return candidate
    return pl.String()


def _text_attributes(topology: Topology) -> set[str]:
    """Attributes some ``where`` compares with a string literal: their values are text (or declared dates)."""
    return {
        attribute
        for view in topology.views
        if view.where is not None
        for attribute, value in literals_of(view.where)
        if isinstance(value, str)
    }


def _numeric_attributes(topology: Topology) -> dict[str, pl.DataType]:
    """Attributes some ``where`` compares with a number: Int64 when every such number is whole, else
    Float64 (their type when no file read shows a value of them)."""
    found: dict[str, pl.DataType] = {}
    for view in topology.views:
        if view.where is None:
            continue
        for attribute, value in literals_of(view.where):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            whole = isinstance(value, int) and found.get(attribute, pl.Int64()) == pl.Int64()
            found[attribute] = pl.Int64() if whole else pl.Float64()
    return found


def _conjuncts(predicate: Predicate) -> list[Predicate]:
    if isinstance(predicate, And):
        return [part for operand in predicate.operands for part in _conjuncts(operand)]
    return [predicate]


def row_condition(view: ViewDefinition, dtypes: Mapping[str, pl.DataType]) -> pl.Expr | None:
    """What every published row of ``view`` must satisfy: the conjuncts of its ``where`` over its own
    attributes (None when there are none). A conjunct over an attribute the view does not publish cannot
    be checked from its rows; a row failing the rest (or unknown on them, SQL's null) is not a row of the
    view as defined. Raises :class:`PredicateError` when a literal does not fit its attribute's type."""
    if view.where is None:
        return None
    checkable = [part for part in _conjuncts(view.where) if set(attributes_of(part)) <= set(view.attributes)]
    if not checkable:
        return None
    condition = checkable[0] if len(checkable) == 1 else And(tuple(checkable))
    check_types(condition, dtypes)  # PredicateError when a literal does not fit an attribute's type
    return to_polars(condition, dtypes)


def _check_rows_match(
    frame: pl.DataFrame, view: ViewDefinition, dtypes: Mapping[str, pl.DataType], key: str, source: str
) -> None:
    """Every row satisfies the conjuncts of the view's ``where`` that mention only its own attributes.

    A conjunct over an attribute the view does not publish cannot be checked from its rows; the rest can,
    and a row failing it (or unknown on it, SQL's null) is not a row of the view as defined. Linear.
    """
    condition = row_condition(view, dtypes)
    if condition is None:
        return
    failing = frame.with_row_index("__row").filter(~condition.fill_null(False)).get_column("__row")
    if failing.len() == 0:
        return
    rows = ", ".join(str(int(row) + 1) for row in failing.head(_ROWS_SHOWN))
    more = f" and {failing.len() - _ROWS_SHOWN} more" if failing.len() > _ROWS_SHOWN else ""
    raise TopologyError(
        f"row(s) {rows}{more} do not satisfy {key}.where {view.where_text!r}: the file is not the view it is "
        "published as (fix the rows or the condition)",
        file=source,
    )


def _check_no_repeats(frame: pl.DataFrame, key: str, source: str) -> None:
    """A view declared ``SELECT DISTINCT`` is a set: a file that repeats a row is not that view."""
    repeated = frame.with_row_index("__row").filter(~pl.struct(frame.columns).is_first_distinct())
    if repeated.is_empty():
        return
    rows = ", ".join(str(int(row) + 1) for row in repeated.get_column("__row").head(_ROWS_SHOWN))
    more = f" and {repeated.height - _ROWS_SHOWN} more" if repeated.height > _ROWS_SHOWN else ""
    raise TopologyError(
        f"row(s) {rows}{more} repeat earlier rows, but {key} is SELECT DISTINCT: the file is not the view it is "
        "published as (drop the repeats or the DISTINCT)",
        file=source,
    )


def load_views(topology: Topology) -> dict[str, pl.DataFrame]:
    """Read every view's published rows (or compute them from the table's source).

    Returns the frames by view name, each with exactly the view's attributes in its declared order.
    Raises :class:`TopologyError` naming the file and the problem; on error nothing is returned.
    """
    return load_data(topology, with_table=False)[0]


def _read_files(
    topology: Topology, with_table: bool, progress: ProgressFactory | None = None
) -> tuple[list[_File], _File | None, dict[str, _File]]:
    """Every data file (or database read) the run needs, read raw and checked for its columns; the
    table's apart, and per view the one holding its rows (none: computed from the table's)."""
    table = topology.table
    files: list[_File] = []
    table_file: _File | None = None
    of_view: dict[str, _File] = {}
    needs_table = with_table or any(view.source is None and view.sql is None for view in topology.views)
    in_database = postgres.is_database(table.source)
    computed = any(view.source is None for view in topology.views)
    if table.source is not None and (needs_table or (computed and not in_database)):
        if in_database:
            frame = postgres.read_relation(
                table.source,
                table.name,
                table.attributes,
                "table.source",
                exact=False,
                progress=_reading(progress, f"table {table.name}"),
            )
            table_file = _File(f"{table.source}#{table.name}", frame)
        else:
            table_file = _File(table.source, _read(table.source, "table.source"))
            _check_columns(table_file.frame, table.attributes, table.source, "table")
        files.append(table_file)
    for i, view in enumerate(topology.views):
        reading = _reading(progress, f"view {view.name}")
        if view.source is None and in_database and view.sql is not None:
            assert table.source is not None
            frame = postgres.read_query(table.source, view.sql, view.attributes, f"views[{i}].sql", progress=reading)
            of_view[view.name] = _File(f"{table.source}#{view.name}", frame)
        elif view.source is None:
            continue
        elif postgres.is_database(view.source):
            key = f"views[{i}].source"
            frame = postgres.read_relation(view.source, view.name, view.attributes, key, exact=True, progress=reading)
            of_view[view.name] = _File(f"{view.source}#{view.name}", frame)
        else:
            key = f"views[{i}].source"
            frame = _read(view.source, key)
            _check_columns(frame, view.attributes, view.source, f"views[{i}] ({view.name})")
            of_view[view.name] = _File(view.source, frame.select(view.attributes))
        files.append(of_view[view.name])
    return files, table_file, of_view


def _reading(progress: ProgressFactory | None, what: str) -> postgres.ReadProgress | None:
    """A database read's progress as a bar of its own (rows read, of the rows the database expects)."""
    if progress is None:
        return None
    bar: Callable[[int, int], None] | None = None

    def advance(done: int, total: int | None) -> None:
        nonlocal bar
        if bar is None:  # the bar appears with the first report, which gives the rows expected
            bar = progress(what, total or 0)
        bar(done, total or done)

    return advance


def _attribute_types(topology: Topology, files: Sequence[_File]) -> dict[str, pl.DataType]:
    """One type per attribute: declared, else inferred across every file without losing a value."""
    text_attributes = _text_attributes(topology)
    numeric_attributes = _numeric_attributes(topology)
    dtypes: dict[str, pl.DataType] = {}
    for attribute in topology.table.attributes:
        declared = topology.table.types.get(attribute)
        if declared is not None:
            dtypes[attribute] = DTYPES[declared]
            continue
        try:
            compared_with = numeric_attributes.get(attribute)
            dtypes[attribute] = _infer(files, attribute, attribute in text_attributes, compared_with)
        except TopologyError as exc:
            raise TopologyError(exc.problem, file=topology.path, key=f"table.attributes.{attribute}") from None
    return dtypes


def load_data(
    topology: Topology, with_table: bool = True, progress: ProgressFactory | None = None
) -> tuple[dict[str, pl.DataFrame], pl.DataFrame | None]:
    """The views' rows and, when ``table.source`` is set and ``with_table``, the private table's rows.

    All with one type per attribute across every file, read without changing any value (module
    docstring), and every view's rows checked against its ``where``. Linear in the size of the files.
    ``progress`` draws the database reads (:mod:`streamdetect.io.postgres`).
    """
    files, table_file, of_view = _read_files(topology, with_table, progress)
    dtypes = _attribute_types(topology, files)
    typed: dict[str, pl.DataFrame] = {}
    for file in files:
        converted = file.frame
        for column in converted.columns:
            converted = _cast(converted, column, dtypes[column], file.path)
        typed[file.path] = converted
    views: dict[str, pl.DataFrame] = {}
    for i, view in enumerate(topology.views):
        if view.where is not None:
            try:
                check_types(view.where, dtypes)
            except PredicateError as exc:
                raise TopologyError(str(exc), file=topology.path, key=f"views[{i}].where") from None
        read = of_view.get(view.name)
        if read is not None:
            views[view.name] = typed[read.path]
            if view.where is not None:
                _check_rows_match(views[view.name], view, dtypes, f"views[{i}]", read.path)
            if view.distinct:
                _check_no_repeats(views[view.name], f"views[{i}]", read.path)
            continue
        assert table_file is not None
        views[view.name] = view.rows_from(typed[table_file.path])
    return views, (typed[table_file.path] if table_file is not None else None)
