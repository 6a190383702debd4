"""PostgreSQL as a source: the private table read in place, a view read from its database relation or by
running its SQL on the table's database, and the views the database itself defines (``pg_views``).

A source is a ``postgresql://`` URI. The password is never in it: libpq takes it from ``PGPASSWORD`` or
a ``.pgpass`` file (``PGPASSFILE``), so a topology can be shared. Rows are read with psycopg 3 through
``COPY (query) TO STDOUT`` in CSV with every value quoted (a null is the one unquoted empty field, so
an empty string stays an empty string) and parsed by polars with the types the database gives: no
inference, so ``02135`` stays text in a text column. Reads run in a read-only transaction.

Types: integers are ``int``, ``numeric``, ``real`` and ``double precision`` are ``float``, ``date`` is
``date``, the text types (``text``, ``varchar``, ``char``, ``name``) are ``str``. Any other type (a
timestamp, a boolean, JSON) is refused naming the column: the checks read text, numbers and dates, and a
publisher who releases it can release it as one of those (a database view casting it).

Names are matched as PostgreSQL reads SQL: exactly, or else without regard to case when that names one
relation or column (a table created as ``patients (name text)`` is the topology's ``Patients`` with
attribute ``Name``).
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import polars as pl

from streamdetect.errors import TopologyError

if TYPE_CHECKING:
    import psycopg

#: Progress of a read: rows read so far, and the rows expected (None: unknown).
ReadProgress = Callable[[int, "int | None"], None]
_SCHEMES = ("postgresql://", "postgres://")
#: Bytes of COPY output between two progress reports.
_REPORT_EVERY = 8 << 20


def is_database(source: str | None) -> bool:
    """Whether a ``source`` names a PostgreSQL database rather than a file."""
    return source is not None and source.startswith(_SCHEMES)


def check_uri(uri: str) -> str | None:
    """What is wrong with a database URI (None: nothing): it must parse, and hold no password. (libpq reads
    the rest when it connects; the driver is loaded only then, as it takes a quarter of a second.)"""
    try:
        parts = urlsplit(uri)
        query = parse_qs(parts.query)
        parts.port  # noqa: B018 -- reading it checks it
    except ValueError as exc:
        return f"not a PostgreSQL URI ({exc})"
    if parts.password is not None or "password" in query:
        return "the URI holds a password: give it in PGPASSWORD or a .pgpass file, never in the topology"
    return None


def shown(uri: str) -> str:
    """The URI as errors show it (it holds no password: :func:`check_uri`)."""
    return uri


@dataclass(frozen=True)
class _Column:
    name: str
    type_name: str
    dtype: pl.DataType | None


def read_relation(
    uri: str,
    relation: str,
    attributes: Sequence[str],
    key: str,
    *,
    exact: bool,
    progress: ReadProgress | None = None,
) -> pl.DataFrame:
    """The rows of ``relation`` (a table or view; ``schema.name`` or a name on the search path) as a frame
    of ``attributes``, typed by the database. ``exact``: the relation must hold no other column (a view's
    rows, all released); otherwise its other columns are not read (the private table's own bookkeeping)."""
    with _connect(uri, key) as connection:
        oid, name = _relation(connection, relation, uri, key)
        columns = _columns_of(connection, "SELECT * FROM " + name, uri, key)
        chosen = _match(columns, attributes, f"{name} in {shown(uri)}", key, exact=exact)
        estimate = connection.execute("SELECT reltuples::bigint FROM pg_class WHERE oid = %s", (oid,)).fetchone()
        total = int(estimate[0]) if estimate and estimate[0] is not None and estimate[0] >= 0 else None
        query = f"SELECT * FROM {name}"
        return _copy(connection, query, chosen, attributes, uri=uri, key=key, total=total, progress=progress)


def read_query(
    uri: str, sql: str, attributes: Sequence[str], key: str, *, progress: ReadProgress | None = None
) -> pl.DataFrame:
    """The rows the view's ``sql`` (a SELECT already translated, so known to be a projection and a
    selection of the table) returns on the database, as a frame of ``attributes``."""
    query = sql.strip().rstrip(";")
    with _connect(uri, key) as connection:
        columns = _columns_of(connection, query, uri, key)
        chosen = _match(columns, attributes, f"the result of {key}", key, exact=True)
        return _copy(connection, query, chosen, attributes, uri=uri, key=key, total=None, progress=progress)


def database_views(uri: str, schema: str) -> list[tuple[str, str]]:
    """The views ``schema`` defines (``pg_views``): (name, definition), by name."""
    with _connect(uri, "the database") as connection:
        rows = connection.execute(
            "SELECT viewname, definition FROM pg_views WHERE schemaname = %s ORDER BY viewname", (schema,)
        ).fetchall()
    return [(str(name), str(definition)) for name, definition in rows]


def table_columns(uri: str, table: str) -> tuple[str, list[tuple[str, str, pl.DataType | None]]]:
    """The relation ``table`` names (quoted) and its columns: (name, the database's type, the frame type
    read, None when the checks cannot read it)."""
    with _connect(uri, "the database") as connection:
        _, name = _relation(connection, table, uri, "--table")
        columns = _columns_of(connection, "SELECT * FROM " + name, uri, "--table")
    return name, [(column.name, column.type_name, column.dtype) for column in columns]


@dataclass(frozen=True)
class CapturedTable:
    """What change capture needs of the table: its schema and name as the database spells them, the column
    and type of each attribute, whether its changes carry whole old images (``REPLICA IDENTITY FULL``),
    and whether the server writes logical decoding (``wal_level = logical``)."""

    schema: str
    name: str
    columns: dict[str, str]
    dtypes: dict[str, pl.DataType]
    full_images: bool
    logical: bool
    #: An attribute whose text is not UTF-8 (a SQL_ASCII database's bytes in another encoding), else None.
    not_utf8: str | None = None


def captured_table(uri: str, table: str, attributes: Sequence[str]) -> CapturedTable:
    """:class:`CapturedTable` of ``table`` (the topology's ``table.name``) in the database ``uri``."""
    with _connect(uri, "table.source") as connection:
        oid, quoted = _relation(connection, table, uri, "table.name")
        columns = _columns_of(connection, "SELECT * FROM " + quoted, uri, "table.name")
        chosen = _match(columns, attributes, f"{quoted} in {shown(uri)}", "table.name", exact=False)
        row = connection.execute(
            "SELECT n.nspname, c.relname, c.relreplident FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = %s",
            (oid,),
        ).fetchone()
        level = connection.execute("SHOW wal_level").fetchone()
        not_utf8 = _not_utf8(connection, quoted, dict(zip(attributes, chosen, strict=True)))
    assert row is not None
    assert level is not None
    return CapturedTable(
        schema=str(row[0]),
        name=str(row[1]),
        columns={attribute: column.name for attribute, column in zip(attributes, chosen, strict=True)},
        dtypes={attribute: column.dtype for attribute, column in zip(attributes, chosen, strict=True) if column.dtype},
        full_images=row[2] == "f",
        logical=level[0] == "logical",
        not_utf8=not_utf8,
    )


def _not_utf8(connection: psycopg.Connection[Any], table: str, columns: dict[str, _Column]) -> str | None:
    """In a SQL_ASCII database (which stores text as bytes in no declared encoding), the first attribute of
    text type holding a value that is not UTF-8, checked in the server (the bytes decoded there, nothing
    sent); None elsewhere: the server converts from the database's encoding."""
    import psycopg  # noqa: PLC0415

    if connection.info.parameter_status("server_encoding") != "SQL_ASCII":
        return None
    for attribute, column in columns.items():
        if column.dtype != pl.String:
            continue
        name = _quoted(column.name)
        try:
            with connection.transaction():  # a savepoint: the read goes on after a refusal
                connection.execute(
                    f"SELECT 1 FROM {table} WHERE convert_from(textsend({name}::text), 'UTF8') IS NULL LIMIT 1"
                )
        except psycopg.DataError:
            return attribute
    return None


def execute(uri: str, *statements: str) -> None:
    """Run ``statements`` on the database, each committed (the benchmarks' own tables)."""
    with _connect(uri, "the database", read_only=False) as connection:
        for statement in statements:
            connection.execute(statement)


def query(uri: str, sql: str) -> list[tuple[Any, ...]]:
    """The rows ``sql`` returns (read-only)."""
    with _connect(uri, "the database") as connection:
        return list(connection.execute(sql).fetchall())


def drop_slot(uri: str, slot: str, *, timeout_s: float = 30.0) -> None:
    """Drop the replication slot ``slot`` and the publication of that name, where they exist (a capture
    forgotten: an unused slot keeps the server's write-ahead log from being recycled). A slot still held
    by a connection that is going away (its connector just stopped) is tried again for ``timeout_s``."""
    import psycopg  # noqa: PLC0415

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with _connect(uri, "the database", read_only=False) as connection:
                connection.execute(
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = %s",
                    (slot,),
                )
                connection.execute(f"DROP PUBLICATION IF EXISTS {_quoted(slot)}")
            return
        except psycopg.errors.ObjectInUse:
            if time.monotonic() > deadline:
                raise TopologyError(
                    f"the replication slot {slot} is still in use in {shown(uri)}: stop what reads it, then "
                    f"SELECT pg_drop_replication_slot('{slot}')"
                ) from None
            time.sleep(0.5)
        except psycopg.Error as exc:
            raise TopologyError(
                f"could not drop the replication slot {slot} in {shown(uri)} ({_first_line(exc)}): drop it by hand, "
                f"SELECT pg_drop_replication_slot('{slot}'), and DROP PUBLICATION {slot}"
            ) from None


def _connect(uri: str, key: str, *, read_only: bool = True) -> psycopg.Connection[Any]:
    import psycopg  # noqa: PLC0415 (loaded when a database is read)

    problem = check_uri(uri)
    if problem is not None:
        raise TopologyError(f"{key}: {problem}")
    try:
        # Reads run in one read-only transaction; the one write (dropping a slot) commits as it goes.
        connection = psycopg.connect(uri, connect_timeout=10, autocommit=not read_only)
    except psycopg.OperationalError as exc:
        raise TopologyError(f"cannot connect to {shown(uri)} (named by {key}): {_first_line(exc)}") from None
    if read_only:
        connection.read_only = True
    connection.execute("SET datestyle = 'ISO'")
    return as_text(connection)


def as_text(connection: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    """``connection``, its text read as ``str``. A SQL_ASCII database (initdb's default under the C
    locale) has psycopg return its text, names in the catalogs included, as bytes: read as UTF-8 there,
    which the server passes through unconverted."""
    if connection.info.encoding == "ascii":
        connection.execute("SET client_encoding = 'UTF8'")
    return connection


def _relation(connection: psycopg.Connection[Any], relation: str, uri: str, key: str) -> tuple[int, str]:
    """The oid of the table or view ``relation`` names and its quoted name: an exact match, else the one
    relation whose name matches without regard to case (on the search path, or in the schema given)."""
    schema, _, name = relation.rpartition(".")
    rows = connection.execute(
        """
        SELECT c.oid, n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE c.relkind IN ('r', 'v', 'm', 'p', 'f') AND lower(c.relname) = lower(%s)
          AND (CASE WHEN %s = '' THEN n.nspname = ANY (current_schemas(false)) ELSE lower(n.nspname) = lower(%s) END)
        """,
        (name, schema, schema),
    ).fetchall()
    exact = [row for row in rows if row[2] == name and (not schema or row[1] == schema)]
    found = exact or rows
    if len(found) != 1:
        problem = "no table or view" if not found else f"{len(found)} tables or views"
        raise TopologyError(f"{key}: {problem} named {relation!r} in {shown(uri)}")
    oid, namespace, relname = found[0]
    return int(oid), f"{_quoted(namespace)}.{_quoted(relname)}"


def _columns_of(connection: psycopg.Connection[Any], query: str, uri: str, key: str) -> list[_Column]:
    """The columns ``query`` returns, with their types, without reading a row."""
    import psycopg  # noqa: PLC0415

    try:
        cursor = connection.execute(f"SELECT * FROM ({query}) AS described LIMIT 0")
    except psycopg.Error as exc:
        raise TopologyError(f"{key}: the database refused the query: {_first_line(exc)}", file=shown(uri)) from None
    description = cursor.description or []
    oids = [column.type_code for column in description]
    names = dict(
        connection.execute("SELECT t.oid, t.typname FROM pg_type t WHERE t.oid = ANY (%s)", (oids,)).fetchall()
    )
    typed = [(column.name, str(names.get(column.type_code, column.type_code))) for column in description]
    return [_Column(name, type_name, _DTYPES.get(type_name)) for name, type_name in typed]


_DTYPES: dict[str, pl.DataType] = {
    **dict.fromkeys(("int2", "int4", "int8", "oid"), pl.Int64()),
    **dict.fromkeys(("float4", "float8", "numeric"), pl.Float64()),
    **dict.fromkeys(("text", "varchar", "bpchar", "name", "char", "citext"), pl.String()),
    "date": pl.Date(),
}


def _match(
    columns: Sequence[_Column], attributes: Sequence[str], where: str, key: str, *, exact: bool
) -> list[_Column]:
    """Per attribute, its column: the same name, else the one column whose name matches regardless of case."""
    chosen: list[_Column] = []
    for attribute in attributes:
        same = [column for column in columns if column.name == attribute]
        alike = same or [column for column in columns if column.name.lower() == attribute.lower()]
        if len(alike) != 1:
            have = ", ".join(repr(column.name) for column in columns)
            problem = "missing from" if not alike else "matched by several columns of"
            raise TopologyError(f"{key}: attribute {attribute!r} is {problem} {where} (it has {have})")
        column = alike[0]
        if column.dtype is None:
            raise TopologyError(
                f"{key}: column {column.name!r} of {where} has type {column.type_name}, which the checks do not "
                "read (text, integer, numeric, date): release it as one of those"
            )
        chosen.append(column)
    if exact:
        extra = [column.name for column in columns if column not in chosen]
        if extra:
            raise TopologyError(
                f"{key}: {where} also has column(s) {', '.join(map(repr, extra))} that the view does not list; "
                "add them to the view (they are released) or leave them out of the relation"
            )
    return chosen


def _copy(
    connection: psycopg.Connection[Any],
    query: str,
    chosen: Sequence[_Column],
    attributes: Sequence[str],
    *,
    uri: str,
    key: str,
    total: int | None,
    progress: ReadProgress | None,
) -> pl.DataFrame:
    """``COPY (SELECT the chosen columns FROM (query)) TO STDOUT`` as CSV, parsed with the columns' types."""
    import psycopg  # noqa: PLC0415

    selected = ", ".join(_quoted(column.name) for column in chosen)
    buffer = io.BytesIO()
    lines = reported = 0
    try:
        with connection.cursor().copy(
            f"COPY (SELECT {selected} FROM ({query}) AS rows) TO STDOUT WITH (FORMAT csv, FORCE_QUOTE *)"
        ) as copy:
            for block in copy:
                buffer.write(block)
                lines += bytes(block).count(b"\n")
                if progress is not None and buffer.tell() - reported >= _REPORT_EVERY:
                    reported = buffer.tell()
                    progress(lines, total)
    except psycopg.Error as exc:
        raise TopologyError(
            f"{key}: reading from the database failed: {_first_line(exc)}{_encoding_hint(connection, exc)}",
            file=shown(uri),
        ) from None
    if progress is not None:
        progress(lines, lines)
    schema = {attribute: column.dtype for attribute, column in zip(attributes, chosen, strict=True)}
    if not buffer.tell():
        return pl.DataFrame(schema=schema)
    buffer.seek(0)
    # COPY writes in the client encoding: UTF-8 but where the URI names another (a SQL_ASCII database whose
    # bytes are LATIN1, say), which polars then decodes as Python does.
    encoding = connection.info.encoding
    return pl.read_csv(
        buffer,
        has_header=False,
        schema=schema,  # type: ignore[arg-type]
        encoding="utf8" if encoding == "utf-8" else encoding,
    )


def _encoding_hint(connection: psycopg.Connection[Any], error: Exception) -> str:
    """How to read a SQL_ASCII database whose text is not UTF-8 (the server stores any bytes there and checks
    them only against the client encoding)."""
    if "invalid byte sequence" not in str(error) or connection.info.parameter_status("server_encoding") != "SQL_ASCII":
        return ""
    return (
        " (the database is SQL_ASCII: it keeps text as bytes in no declared encoding, read here as UTF-8; "
        "name the one its text is in on the URI, e.g. ?client_encoding=LATIN1)"
    )


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
