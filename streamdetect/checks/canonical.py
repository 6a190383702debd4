"""The canonical text of a finding: JSON scalars, the sorted compact JSON its id hashes, the id itself."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Sequence
from typing import Any, Union

Scalar = Union[str, int, float, bool, dt.date, dt.datetime, None]


def json_scalar(value: Scalar) -> str | int | float | bool | None:
    """A value as a JSON scalar of its column's type (dates as ISO 8601 strings)."""
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return value


def value_text(value: object) -> str:
    """A value as reports print it (dates ISO 8601)."""
    return str(json_scalar(value))  # type: ignore[arg-type]


def canonical_json(content: dict[str, Any]) -> str:
    """``content`` as compact JSON with sorted keys: the text a finding's id hashes."""
    return json.dumps(content, sort_keys=True, separators=(",", ":"), default=str)


def quote(text: str) -> str:
    """``text`` as a JSON string, as :func:`json.dumps` writes it (ASCII, escaped): the C encoder's own."""
    return json.encoder.encode_basestring_ascii(text)


def _json_default(value: object) -> str:
    """How :func:`canonical_json` writes a value JSON has no type for, once :func:`json_scalar` made dates
    ISO 8601 strings: dates so, anything else as ``str`` (its ``default``)."""
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return str(value)


#: :func:`canonical_json` of a document whose scalars are raw (dates, tuples), by the C encoder: the same
#: text as of the :func:`json_scalar` forms (dates are the only scalars that form changes, and
#: :func:`_json_default` writes them alike), without building those forms first.
raw_canonical = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), default=_json_default, check_circular=False
).encode


def member_text(member: Sequence[tuple[str, Scalar]]) -> str:
    """A SIND class member's canonical JSON text (an object of its (attribute, value) pairs, keys sorted),
    as :func:`canonical_json` writes it inside a finding's body: cached per row by the SIND check, so that
    a class of thousands of members is written by joining texts (:attr:`SindFinding.members_text`)."""
    return raw_canonical(dict(member))


def digest(canonical: str) -> str:
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def stable_id(content: dict[str, Any]) -> str:
    """A short hash of what a finding says, so a replayed or recomputed finding keeps its id."""
    return digest(canonical_json(content))
