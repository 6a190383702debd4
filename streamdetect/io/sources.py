"""Read the published rows of every view (CSV or Parquet) into polars frames with one type per attribute.

Types: a declared attribute type (``table.attributes`` as a mapping) is enforced and a cell that does
not fit is an error naming the file, the column and the row; an undeclared attribute gets the narrowest
of int, float and str that fits its values in *every* file, so that join columns agree across views.
A view with no ``source`` is computed from ``table.source``: its selection, then its projection,
duplicates kept (SQL bag semantics).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import polars as pl

from streamdetect.errors import PredicateError, TopologyError
from streamdetect.model.predicates import check_types, to_polars
from streamdetect.model.topology import AttributeType, Topology

_DTYPES: Mapping[AttributeType, pl.DataType] = {
    "str": pl.String(),
    "int": pl.Int64(),
    "float": pl.Float64(),
    "date": pl.Date(),
}


def _read(path: str) -> pl.DataFrame:
    suffix = Path(path).suffix.lower()
    try:
        if suffix == ".csv":
            return pl.read_csv(path, infer_schema=False)
        if suffix in (".parquet", ".pq"):
            return pl.read_parquet(path)
    except FileNotFoundError:
        raise TopologyError("no such file", file=path) from None
    except (OSError, pl.exceptions.PolarsError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TopologyError(f"cannot read the file: {first_line}", file=path) from None
    raise TopologyError(f"unsupported file type {suffix!r}; expected .csv or .parquet", file=path)


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


def _cast(frame: pl.DataFrame, column: str, dtype: pl.DataType, path: str) -> pl.DataFrame:
    source = frame.get_column(column)
    if source.dtype == dtype:
        return frame
    try:
        if dtype == pl.Date() and source.dtype == pl.String():
            converted = source.str.strip_chars().str.to_date(strict=True)
        elif source.dtype == pl.String():
            converted = source.str.strip_chars().cast(dtype, strict=True)
        else:
            converted = source.cast(dtype, strict=True)
    except pl.exceptions.PolarsError:
        loose = source.cast(dtype, strict=False) if dtype != pl.Date() else source.str.to_date(strict=False)
        bad = (loose.is_null() & source.is_not_null()).arg_max()
        row = int(bad) if bad is not None else 0
        raise TopologyError(
            f"column {column!r}, row {row + 1}: value {source[row]!r} is not of type {dtype}",
            file=path,
        ) from None
    return frame.with_columns(converted.alias(column))


def _fits(series: pl.Series, dtype: pl.DataType) -> bool:
    if series.dtype != pl.String():
        return series.dtype == dtype or (dtype == pl.Float64() and series.dtype.is_numeric())
    converted = series.str.strip_chars().cast(dtype, strict=False)
    return bool((converted.is_null() == series.is_null()).all())


def _infer(frames: list[tuple[str, pl.DataFrame]], column: str) -> pl.DataType:
    columns = [frame.get_column(column) for _, frame in frames if column in frame.columns]
    for candidate in (pl.Int64(), pl.Float64()):
        if all(_fits(series, candidate) for series in columns):
            return candidate
    dtypes = {series.dtype for series in columns}
    if len(dtypes) == 1 and next(iter(dtypes)) != pl.String():
        return next(iter(dtypes))
    return pl.String()


def load_views(topology: Topology) -> dict[str, pl.DataFrame]:
    """Read every view's published rows (or compute them from the table's source).

    Returns the frames by view name, each with exactly the view's attributes in its declared order.
    Raises :class:`TopologyError` naming the file and the problem; on error nothing is returned.
    """
    return load_data(topology, with_table=False)[0]


def load_data(topology: Topology, with_table: bool = True) -> tuple[dict[str, pl.DataFrame], pl.DataFrame | None]:
    """The views' rows and, when ``table.source`` is set and ``with_table``, the private table's rows.

    All with one type per attribute across every file.
    """
    table = topology.table
    raw: list[tuple[str, pl.DataFrame]] = []
    table_frame: pl.DataFrame | None = None
    needs_table = with_table or any(view.source is None for view in topology.views)
    if table.source is not None and needs_table:
        table_frame = _read(table.source)
        _check_columns(table_frame, table.attributes, table.source, "table")
        raw.append((table.source, table_frame))
    for i, view in enumerate(topology.views):
        if view.source is None:
            continue
        frame = _read(view.source)
        _check_columns(frame, view.attributes, view.source, f"views[{i}] ({view.name})")
        raw.append((view.source, frame.select(view.attributes)))
    dtypes: dict[str, pl.DataType] = {}
    for attribute in table.attributes:
        declared = table.types.get(attribute)
        dtypes[attribute] = _DTYPES[declared] if declared is not None else _infer(raw, attribute)
    typed: dict[str, pl.DataFrame] = {}
    for path, frame in raw:
        converted = frame
        for column in frame.columns:
            converted = _cast(converted, column, dtypes[column], path)
        typed[path] = converted
    views: dict[str, pl.DataFrame] = {}
    for i, view in enumerate(topology.views):
        if view.where is not None:
            try:
                check_types(view.where, dtypes)
            except PredicateError as exc:
                raise TopologyError(str(exc), file=topology.path, key=f"views[{i}].where") from None
        if view.source is not None:
            views[view.name] = typed[view.source]
            continue
        assert table.source is not None
        assert table_frame is not None
        base = typed[table.source]
        if view.where is not None:
            base = base.filter(to_polars(view.where, dtypes))
        views[view.name] = base.select(view.attributes)
    return views, (typed[table.source] if table.source is not None and table_frame is not None else None)
