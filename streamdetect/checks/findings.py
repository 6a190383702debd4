"""Typed findings shared by every check, with stable ids and their JSON form."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from typing import Any, Union

Scalar = Union[str, int, float, bool, dt.date, dt.datetime, None]


def json_scalar(value: Scalar) -> str | int | float | bool | None:
    """A value as a JSON scalar of its column's type (dates as ISO 8601 strings)."""
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return value


def stable_id(content: dict[str, Any]) -> str:
    """A short hash of what a finding says, so a replayed or recomputed finding keeps its id."""
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class LinkageFinding:
    """An identifier value linked to fewer than k sensitive values in some channel's joined view.

    ``views`` is one channel of the minimal level (the first in sort order), ``channels`` every channel
    of that level that discloses it, ``sensitive_values`` the values linked in ``views``.
    ``selections_differ`` marks a channel whose views have different selections, where the natural
    join may link rows that no table instance links (Yao, Wang & Jajodia 2005, section 5).
    """

    k: int
    identifier_attribute: str
    identifier_value: Scalar
    sensitive_attribute: str
    sensitive_values: tuple[Scalar, ...]
    views: tuple[str, ...]
    channels: tuple[tuple[str, ...], ...]
    selections_differ: bool = False

    check = "linkage"

    @property
    def level(self) -> int:
        """The minimal level: the number of views of the smallest disclosing channel."""
        return len(self.views)

    @property
    def total(self) -> bool:
        """True when a single sensitive value is linked (a total disclosure), else partial."""
        return len(self.sensitive_values) == 1

    def to_dict(self) -> dict[str, Any]:
        """The documented JSON form (docs/report-format.md)."""
        body: dict[str, Any] = {
            "check": self.check,
            "k": self.k,
            "identifier": {"attribute": self.identifier_attribute, "value": json_scalar(self.identifier_value)},
            "sensitive": {
                "attribute": self.sensitive_attribute,
                "values": [json_scalar(value) for value in self.sensitive_values],
            },
            "views": list(self.views),
            "channels": [list(channel) for channel in self.channels],
            "level": self.level,
        }
        if self.selections_differ:
            body["selections_differ"] = True
        return {"id": stable_id(body), **body}

    @property
    def id(self) -> str:
        """Stable id: a hash of everything the finding says."""
        return str(self.to_dict()["id"])


@dataclass(frozen=True)
class AssociationCoverFinding:
    """A minimal association cover smaller than k (Yao, Wang & Jajodia 2005, section 3).

    Every table instance that yields the views pairs ``identifier_value`` with one of
    ``sensitive_values``; ``views`` are the views whose projection facts force it.
    """

    k: int
    identifier_attribute: str
    identifier_value: Scalar
    sensitive_attribute: str
    sensitive_values: tuple[Scalar, ...]
    views: tuple[str, ...]
    exact: bool = True

    check = "k-anonymity"

    def to_dict(self) -> dict[str, Any]:
        """The documented JSON form (docs/report-format.md)."""
        body: dict[str, Any] = {
            "check": self.check,
            "k": self.k,
            "identifier": {"attribute": self.identifier_attribute, "value": json_scalar(self.identifier_value)},
            "sensitive": {
                "attribute": self.sensitive_attribute,
                "values": [json_scalar(value) for value in self.sensitive_values],
            },
            "views": list(self.views),
            "exact": self.exact,
        }
        return {"id": stable_id(body), **body}

    @property
    def id(self) -> str:
        """Stable id: a hash of everything the finding says."""
        return str(self.to_dict()["id"])


@dataclass(frozen=True)
class SindFinding:
    """A class of symmetrically indistinguishable public tuples that does not protect its members.

    (Yao, Wang, Wang & Jajodia, Definitions 1-2.) ``members`` are the public (B) tuples of the class,
    each as (attribute, value) pairs; ``reason`` says whether it is smaller than k or certain.
    """

    k: int
    sensitive_attribute: str
    members: tuple[tuple[tuple[str, Scalar], ...], ...]
    views: tuple[str, ...]
    reason: str
    exact: bool = True

    check = "sind"

    def to_dict(self) -> dict[str, Any]:
        """The documented JSON form (docs/report-format.md)."""
        body: dict[str, Any] = {
            "check": self.check,
            "k": self.k,
            "sensitive": self.sensitive_attribute,
            "members": [{name: json_scalar(value) for name, value in member} for member in self.members],
            "views": list(self.views),
            "reason": self.reason,
            "exact": self.exact,
        }
        return {"id": stable_id(body), **body}

    @property
    def id(self) -> str:
        """Stable id: a hash of everything the finding says."""
        return str(self.to_dict()["id"])


@dataclass(frozen=True)
class RsindFinding(SindFinding):
    """A block of the RSIND partition found that is smaller than k (section 3.2); never exact."""

    check = "rsind"
