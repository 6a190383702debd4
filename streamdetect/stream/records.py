"""Kafka records of published views, and of the private table: one record is one batch of one of them.

The value is the batch's rows, as Arrow IPC (a stream: the fast form, types travel with the data) or as
JSON lines (one object per row, for hand-written publishers); the headers say what the rows are:

========================  =====================================================================
``streamdetect-view``     the view's name (else the topic tells, :mod:`streamdetect.stream.topics`)
``streamdetect-table``    instead of a view: the rows are the private table's (its name; the
                          table's topic tells as well), for the checks that read it
``streamdetect-op``       ``add`` (rows published) or ``retract`` (rows withdrawn)
``streamdetect-batch``    the batch's id (a replayed record carries the same id)
``streamdetect-published``  the publication time, ISO 8601 with a UTC offset
``content-type``          ``application/vnd.apache.arrow.stream`` or ``application/x-ndjson``
========================  =====================================================================

Reading is as strict as reading files (:mod:`streamdetect.io.sources`): the rows must hold exactly the
view's (the table's) attributes, each of its declared type (an undeclared attribute takes the type its first record
brings, and the Detector holds every later batch to it), and satisfy the view's ``where``. A record that
fails is not half read: :func:`decode_record` returns a :class:`DeadLetter` with a reason (one of
:data:`REASONS`, fit for a metric label) and a detail that names the header, attribute or row but
never a value, since dead letters are logged and counted.
"""

from __future__ import annotations

import datetime as dt
import io
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Literal

import polars as pl

from streamdetect.errors import PredicateError
from streamdetect.io.sources import DTYPES, ISO_DATE, row_condition
from streamdetect.model.codecs import frame_to_ipc, frame_to_ipc_view
from streamdetect.model.topology import Topology, ViewDefinition
from streamdetect.stream.settings import DEFAULT_MAX_BYTES

Format = Literal["arrow", "json"]
Op = Literal["add", "retract"]
CONTENT_TYPES: dict[Format, str] = {"arrow": "application/vnd.apache.arrow.stream", "json": "application/x-ndjson"}
HEADER_VIEW = "streamdetect-view"
HEADER_TABLE = "streamdetect-table"
HEADER_OP = "streamdetect-op"
HEADER_BATCH = "streamdetect-batch"
HEADER_PUBLISHED = "streamdetect-published"
HEADER_CONTENT = "content-type"
#: The findings topic's largest record (its ``max.message.bytes``, set when streamdetect creates it): a
#: SIND class lists its members, thousands of public tuples (BP: 41,699 in eight findings, about 1 MB each).
FINDINGS_MAX_BYTES = 16 << 20
REASONS = (
    "too_large",
    "bad_header",
    "unknown_view",
    "not_arrow",
    "not_json",
    "missing_attribute",
    "unknown_attribute",
    "wrong_type",
    "violates_where",
    "refused",  # read, but the Detector refused the batch (a withdrawal of rows never published)
)
#: Rows named in a detail.
_ROWS_SHOWN = 5

Headers = Sequence[tuple[str, bytes]]


class Carried(Enum):
    """What a topic carries besides a view: the private table's rows (its topic, :func:`table_topic`)."""

    TABLE = "table"


#: What a record's topic says it carries, when its headers do not: a view's name, the table, or nothing.
Topic = str | Carried | None
#: The metric label and log name of the private table's records (views are labelled by their names).
TABLE_LABEL = "(table)"


@dataclass(frozen=True)
class Publication:
    """A batch of one view's rows (``view`` None: of the private table's), published or withdrawn at
    ``published``."""

    view: str | None
    op: Op
    batch_id: str
    published: dt.datetime
    rows: pl.DataFrame

    @property
    def label(self) -> str:
        """The view's name, or :data:`TABLE_LABEL` for the table's rows (a metric label, a log name)."""
        return TABLE_LABEL if self.view is None else self.view


@dataclass(frozen=True)
class DeadLetter:
    """A record that cannot be read: ``reason`` (one of :data:`REASONS`) and what is wrong (no values)."""

    reason: str
    detail: str


class _Unreadable(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        assert reason in REASONS
        super().__init__(detail)
        self.letter = DeadLetter(reason, detail)


def encode_publication(publication: Publication, form: Format = "arrow") -> tuple[bytes, list[tuple[str, bytes]]]:
    """The record value and headers of a publication."""
    if form == "arrow":
        value = frame_to_ipc(publication.rows)
    else:
        lines = (
            json.dumps(row, default=_json_default, separators=(",", ":"))
            for row in publication.rows.iter_rows(named=True)
        )
        value = "\n".join(lines).encode()
    named = (HEADER_VIEW, publication.view.encode()) if publication.view is not None else (HEADER_TABLE, b"")
    headers = [
        named,
        (HEADER_OP, publication.op.encode()),
        (HEADER_BATCH, publication.batch_id.encode()),
        (HEADER_PUBLISHED, publication.published.isoformat().encode()),
        (HEADER_CONTENT, CONTENT_TYPES[form].encode()),
    ]
    return value, headers


def split_publication(
    publication: Publication, form: Format = "arrow", max_bytes: int = DEFAULT_MAX_BYTES
) -> Iterator[tuple[bytes, list[tuple[str, bytes]], int]]:
    """The publication as records under the size limit, halved until each fits (a one-row record is sent
    as it is), with the rows each holds. The parts' batch ids are the publication's with ``.0`` or ``.1``
    appended per halving: the same rows cut again give the same ids."""
    value, headers = encode_publication(publication, form)
    rows = publication.rows
    if len(value) <= max_bytes or rows.height <= 1:
        yield value, headers, rows.height
        return
    half = rows.height // 2
    for suffix, part in ((".0", rows.head(half)), (".1", rows.slice(half))):
        yield from split_publication(
            replace(publication, batch_id=publication.batch_id + suffix, rows=part), form, max_bytes
        )


HEADER_CHANNEL = "streamdetect-channel"
HEADER_LEVEL = "streamdetect-level"


def universal_records(
    tuples: pl.DataFrame, channel: str, level: int, publication: Publication, max_bytes: int = DEFAULT_MAX_BYTES
) -> list[tuple[bytes, list[tuple[str, bytes]]]]:
    """Records of the universal-relation topic: a channel's tuples that ``publication`` added (Arrow IPC
    over the union schema, ``_channel`` and ``_level`` columns included), with the channel, its level and
    the batch and publication time that added them as headers; halved until each fits ``max_bytes``."""
    value = frame_to_ipc_view(tuples)
    if value.nbytes > max_bytes and tuples.height > 1:
        half = tuples.height // 2
        return [
            *universal_records(tuples.head(half), channel, level, publication, max_bytes),
            *universal_records(tuples.slice(half), channel, level, publication, max_bytes),
        ]
    headers = [
        (HEADER_CHANNEL, channel.encode()),
        (HEADER_LEVEL, str(level).encode()),
        (HEADER_VIEW, publication.label.encode()),
        (HEADER_BATCH, publication.batch_id.encode()),
        (HEADER_PUBLISHED, publication.published.isoformat().encode()),
        (HEADER_CONTENT, CONTENT_TYPES["arrow"].encode()),
    ]
    return [(bytes(value), headers)]


def _json_default(value: object) -> str:
    if isinstance(value, dt.date):
        return value.isoformat()
    raise TypeError(f"cannot write a {type(value).__name__} as JSON")


def decode_record(
    topology: Topology,
    value: bytes | None,
    headers: Headers,
    *,
    view: Topic = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Publication | DeadLetter:
    """Read one record: the publication, or why it cannot be read. ``view``: what its topic carries (a
    view's name, or :attr:`Carried.TABLE`), when the record's headers do not say. O(size of the record)."""
    try:
        return _decode(topology, value, headers, view, max_bytes)
    except _Unreadable as unreadable:
        return unreadable.letter


def _decode(topology: Topology, value: bytes | None, headers: Headers, carried: Topic, max_bytes: int) -> Publication:
    if value is None:
        raise _Unreadable("not_arrow", "the record has no value")
    if len(value) > max_bytes:
        raise _Unreadable("too_large", f"the record has {len(value):,} bytes, over the limit of {max_bytes:,}")
    fields = _headers(headers)
    definition, table = _definition(topology, fields, carried)
    op = fields.get(HEADER_OP, "add")
    if op not in ("add", "retract"):
        raise _Unreadable("bad_header", f"{HEADER_OP} must be 'add' or 'retract'")
    published = _published(fields.get(HEADER_PUBLISHED))
    content = fields.get(HEADER_CONTENT, CONTENT_TYPES["arrow"])
    if content == CONTENT_TYPES["arrow"]:
        frame = _arrow(value)
    elif content == CONTENT_TYPES["json"]:
        frame = _json_lines(value, definition)
    else:
        raise _Unreadable("bad_header", f"{HEADER_CONTENT} must be {' or '.join(CONTENT_TYPES.values())}")
    rows = _typed(topology, definition, frame)
    _satisfies_where(topology, definition, rows)
    batch = fields.get(HEADER_BATCH)
    if not batch:
        raise _Unreadable("bad_header", f"no {HEADER_BATCH} header (a replayed record must be known as one)")
    return Publication(None if table else definition.name, op, batch, published, rows)  # type: ignore[arg-type]


def _definition(topology: Topology, fields: dict[str, str], carried: Topic) -> tuple[ViewDefinition, bool]:
    """What the record's rows are, and whether they are the table's: the view its header (else its topic)
    names, or the private table (its header, or the table's topic), read as a view of all its attributes
    with no selection."""
    if HEADER_TABLE in fields or carried is Carried.TABLE:
        if HEADER_VIEW in fields:
            raise _Unreadable(
                "bad_header",
                f"a record of the table (its {HEADER_TABLE} header or topic) has a {HEADER_VIEW} header",
            )
        return ViewDefinition(topology.table.name, topology.table.attributes), True
    name = fields.get(HEADER_VIEW, carried if isinstance(carried, str) else None)
    if name is None:
        raise _Unreadable("bad_header", f"no {HEADER_VIEW} header and no topic to tell the view")
    definition = next((candidate for candidate in topology.views if candidate.name == name), None)
    if definition is None:
        raise _Unreadable("unknown_view", f"the topology has no view named by the {HEADER_VIEW} header")
    return definition, False


def _headers(headers: Headers) -> dict[str, str]:
    fields: dict[str, str] = {}
    for key, raw in headers or ():
        try:
            fields[key] = raw.decode() if raw is not None else ""
        except UnicodeDecodeError:
            raise _Unreadable("bad_header", f"header {key!r} is not UTF-8") from None
    return fields


def _published(text: str | None) -> dt.datetime:
    if text is None:
        raise _Unreadable("bad_header", f"no {HEADER_PUBLISHED} header (the publication time findings carry)")
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise _Unreadable("bad_header", f"{HEADER_PUBLISHED} is not an ISO 8601 time") from None
    if moment.tzinfo is None:
        raise _Unreadable("bad_header", f"{HEADER_PUBLISHED} has no UTC offset")
    return moment


def _arrow(value: bytes) -> pl.DataFrame:
    try:
        return pl.read_ipc_stream(io.BytesIO(value))
    except Exception:  # polars raises several kinds for bytes that are not Arrow
        raise _Unreadable("not_arrow", "the value is not an Arrow IPC stream") from None


def _json_lines(value: bytes, view: ViewDefinition) -> pl.DataFrame:
    columns: dict[str, list[Any]] = {name: [] for name in view.attributes}
    try:
        lines = value.decode().splitlines()
    except UnicodeDecodeError:
        raise _Unreadable("not_json", "the value is not UTF-8 text") from None
    for number, line in enumerate((line for line in lines if line.strip()), start=1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            raise _Unreadable("not_json", f"line {number} is not JSON") from None
        if not isinstance(row, dict):
            raise _Unreadable("not_json", f"line {number} is not a JSON object")
        _same_attributes(list(row), view, f"line {number}")
        for name in view.attributes:
            columns[name].append(row[name])
    series = []
    for name, values in columns.items():
        kinds = {_json_kind(value) for value in values} - {"null"}
        if len(kinds - {"int", "float"}) > 1 or (kinds & {"str", "bool", "other"} and kinds & {"int", "float"}):
            raise _Unreadable("wrong_type", f"attribute {name!r} holds values of several JSON types")
        if kinds & {"bool", "other"}:
            raise _Unreadable("wrong_type", f"attribute {name!r} holds a JSON boolean, array or object")
        dtype: pl.DataType = (
            pl.String()
            if kinds == {"str"}
            else pl.Float64()
            if "float" in kinds
            else pl.Int64()
            if kinds
            else pl.String()
        )
        series.append(pl.Series(name, values, dtype=dtype, strict=False))
    return pl.DataFrame(series)


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    return "other"


def _same_attributes(columns: list[str], view: ViewDefinition, where: str) -> None:
    missing = [name for name in view.attributes if name not in columns]
    if missing:
        raise _Unreadable("missing_attribute", f"{where} lacks attribute(s) {', '.join(map(repr, missing))}")
    extra = [name for name in columns if name not in view.attributes]
    if extra:
        raise _Unreadable(
            "unknown_attribute",
            f"{where} has attribute(s) {', '.join(map(repr, extra))} that {view.name!r} does not hold",
        )


def _typed(topology: Topology, view: ViewDefinition, frame: pl.DataFrame) -> pl.DataFrame:
    """The rows with the view's attributes in order, each of its declared type (checked, never coerced
    with a loss); an undeclared attribute keeps its type, widened to Int64 or Float64."""
    _same_attributes(frame.columns, view, "the batch")
    typed = []
    for name in view.attributes:
        column = frame.get_column(name)
        declared = topology.table.types.get(name)
        target = DTYPES[declared] if declared is not None else _widened(column.dtype)
        if target is None:
            raise _Unreadable("wrong_type", f"attribute {name!r} is {column.dtype}, not text, a number or a date")
        typed.append(_cast(column, target, name))
    return pl.DataFrame(typed)


def _widened(dtype: pl.DataType) -> pl.DataType | None:
    if dtype.is_integer():
        return pl.Int64()
    if dtype.is_float():
        return pl.Float64()
    if dtype == pl.Null():  # a column of nulls only: text until a value says otherwise
        return pl.String()
    if dtype in (pl.String(), pl.Date()):
        return dtype
    return None


def _cast(column: pl.Series, target: pl.DataType, name: str) -> pl.Series:
    if column.dtype == target:
        return column
    if column.dtype == pl.Null():
        return column.cast(target)
    if target == pl.Date() and column.dtype == pl.String():
        iso = column.str.contains(ISO_DATE).fill_null(True)
        converted = column.str.to_date("%Y-%m-%d", strict=False)
        failed = (~iso) | (converted.is_null() & column.is_not_null())
        if failed.any():
            raise _Unreadable(
                "wrong_type", f"attribute {name!r}, row {int(failed.arg_max() or 0) + 1}: not an ISO date"
            )
        return converted
    same_family = (column.dtype.is_integer() and target.is_integer()) or (
        column.dtype.is_numeric() and target.is_float()
    )
    if not same_family:
        raise _Unreadable("wrong_type", f"attribute {name!r} is {column.dtype}, the table declares {target}")
    converted = column.cast(target, strict=False)
    lost = converted.is_null() & column.is_not_null()
    if lost.any():
        raise _Unreadable("wrong_type", f"attribute {name!r}, row {int(lost.arg_max() or 0) + 1}: out of range")
    return converted


def _satisfies_where(topology: Topology, view: ViewDefinition, rows: pl.DataFrame) -> None:
    try:
        condition = row_condition(view, rows.schema)
    except PredicateError:
        raise _Unreadable("wrong_type", f"an attribute of {view.name}'s where has another type here") from None
    if condition is None:
        return
    failing = rows.with_row_index("\0row").filter(~condition.fill_null(False)).get_column("\0row")
    if failing.len():
        shown = ", ".join(str(int(row) + 1) for row in failing.head(_ROWS_SHOWN))
        more = f" and {failing.len() - _ROWS_SHOWN} more" if failing.len() > _ROWS_SHOWN else ""
        raise _Unreadable("violates_where", f"row(s) {shown}{more} do not satisfy the where of view {view.name!r}")
