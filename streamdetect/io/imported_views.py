"""A topology from a database's own view definitions (``streamdetect import-views``): the table's
columns with their types, and every view of ``pg_views`` in a schema that is a projection and a selection
of the table, given as its SQL (read as :mod:`streamdetect.model.sql_views` reads any view's SQL)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from streamdetect.errors import PredicateError, TopologyError
from streamdetect.io import postgres
from streamdetect.model.sql_views import view_from_sql

_TYPE_NAMES = {pl.Int64(): "int", pl.Float64(): "float", pl.Date(): "date", pl.String(): "str"}


@dataclass
class Imported:
    """The topology document, and what was left out of it with why (a view, or a column)."""

    document: dict[str, Any]
    left_out: list[tuple[str, str]] = field(default_factory=list)


def import_views(uri: str, schema: str, table: str, identifiers: Sequence[str], sensitive: Sequence[str]) -> Imported:
    """The topology of ``table`` in the database ``uri`` with the views ``schema`` defines over it.

    ``identifiers`` and ``sensitive`` name the table's columns with those roles (a database does not say
    which columns identify a person). A view that is not a projection and a selection of ``table`` (a
    join, another table, an aggregate) is left out with the construct that makes it so; so is a column
    of a type the checks do not read."""
    problem = postgres.check_uri(uri)
    if problem is not None:
        raise TopologyError(problem, key="DATABASE")
    _, columns = postgres.table_columns(uri, table)
    left_out = [
        (f"column {name}", f"type {type_name}, which the checks do not read (text, integer, numeric, date)")
        for name, type_name, dtype in columns
        if dtype is None
    ]
    types = {name: _TYPE_NAMES[dtype] for name, _, dtype in columns if dtype is not None}
    for option, names in (("--identifier", identifiers), ("--sensitive", sensitive)):
        for name in names:
            if name not in types:
                raise TopologyError(f"{option} {name!r} is not a column of {table} (it has {', '.join(types)})")
    views = []
    for name, definition in postgres.database_views(uri, schema):
        try:
            view_from_sql(definition, table, list(types), types)
        except PredicateError as exc:
            left_out.append((f"view {schema}.{name}", str(exc)))
            continue
        views.append({"name": name, "sql": definition.strip().rstrip(";")})
    if not views:
        raise TopologyError(f"no view in schema {schema!r} is a projection and a selection of {table!r}")
    document: dict[str, Any] = {
        "name": table.rpartition(".")[2],
        "table": {
            "name": table,
            "attributes": types,
            "identifiers": list(identifiers),
            "sensitive": list(sensitive),
            "source": uri,
        },
        "views": views,
    }
    return Imported(document, left_out)
