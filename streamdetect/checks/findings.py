"""Typed findings shared by every check, with stable ids and their JSON form."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from streamdetect.checks.canonical import (
    Scalar,
    canonical_json,
    digest,
    json_scalar,
    member_text,
    quote,
    raw_canonical,
    value_text,
)


def _association(
    finding: LinkageFinding | AssociationCoverFinding,
) -> dict[str, Any]:
    """The JSON fields an identifier-to-sensitive finding shares."""
    return {
        "check": finding.check,
        "k": finding.k,
        "identifier": {"attribute": finding.identifier_attribute, "value": json_scalar(finding.identifier_value)},
        "sensitive": {
            "attribute": finding.sensitive_attribute,
            "values": [json_scalar(value) for value in finding.sensitive_values],
        },
        "views": list(finding.views),
    }


class Finding:
    """What every check finds: a finding whose id is a hash of its JSON body, which says which check
    raised it, over which views, whether it holds in every instance (certain), and how it is shown."""

    if TYPE_CHECKING:  # each kind has them as fields or properties

        @property
        def check(self) -> str: ...
        @property
        def views(self) -> tuple[str, ...]: ...
        @property
        def certain(self) -> bool: ...

        k: int

        @property
        def subject(self) -> tuple[Any, ...]: ...

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    @property
    def closure_level(self) -> int | None:
        """The minimal level of the view-join closure where it shows (the views joined), for the kinds
        found through the closure; None for the others."""
        return None

    @property
    def level_label(self) -> str:
        """The ``level`` label of the open-findings metric: :attr:`closure_level`, or empty (a label never
        holds an identifier or a sensitive value)."""
        level = self.closure_level
        return "" if level is None else str(level)

    @property
    def listed_members(self) -> tuple[Any, ...]:
        """The members the finding lists (a class of indistinguishable tuples), which an event may list in
        part; none for the others."""
        return ()

    @property
    def order_key(self) -> tuple[object, ...]:
        """Its place among its check's findings in a report rebuilt from events (``findings``): by id
        unless the kind has an order of its own."""
        return (self.id,)

    @property
    def channels_shown(self) -> tuple[tuple[str, ...], ...]:
        """The sets of views a view-join graph marks for it: the views it names."""
        return (self.views,)

    def headline(self) -> str:
        """One line saying what it discloses (a JUnit test case's name, before the id)."""
        raise NotImplementedError

    def verdict(self) -> str:
        """One line saying why it is a violation (a JUnit failure's message)."""
        raise NotImplementedError

    @cached_property
    def json_form(self) -> dict[str, Any]:
        """:meth:`to_dict`, computed once per finding (its id reads it, and so does a finding event): a
        shared dict, to read, not to change."""
        return self.to_dict()

    def _body_text(self) -> str | None:
        """The canonical text of :meth:`to_dict`'s body written directly, or None (then it comes from
        :meth:`to_dict`). A fast path for findings raised and cleared by the hundred per stream update:
        the id needs only this text, not the document."""
        return None

    @cached_property
    def _canonical(self) -> str:
        """The canonical text of the body (what the id hashes)."""
        text = self._body_text()
        if text is not None:
            return text
        self.json_form  # noqa: B018 -- to_dict goes through _identified, which keeps the text here
        return str(self.__dict__["_canonical"])

    @cached_property
    def id(self) -> str:
        """Stable id: a hash of everything the finding says (computed once per finding: diffs and reports
        read it many times)."""
        return digest(self._canonical)

    def _identified(self, body: dict[str, Any]) -> dict[str, Any]:
        """``body`` with its id first (what :meth:`to_dict` returns); the canonical text hashed for the id
        is kept for :attr:`json_text`, so a finding's body is serialised once."""
        canonical = canonical_json(body)
        self.__dict__["_canonical"] = canonical  # beside the cached properties (frozen dataclasses too)
        # An id set already stays (a finding rebuilt from a body cut to fit a topic keeps the whole one's).
        return {"id": self.__dict__.get("id") or digest(canonical), **body}

    @cached_property
    def json_text(self) -> str:
        """:attr:`json_form` as compact JSON text: the id, then the body's keys sorted (the canonical text
        the id hashes, reused: a finding event embeds it instead of serialising the body again). Every
        finding's body has fields, so the text opens ``{"id":...,``."""
        return f'{{"id":{quote(self.id)},{self._canonical[1:]}'


F = TypeVar("F")


@dataclass(frozen=True)
class Delta(Generic[F]):
    """What an update changed: findings raised and findings cleared (a changed finding is both).

    A sequence, not always a tuple: a check may hand back its findings lazily, built when read (the
    table checks' first load, where a table can yield one finding per row)."""

    raised: Sequence[F]
    cleared: Sequence[F]


def diff(before: Sequence[Finding], after: Sequence[Finding]) -> Delta[Any]:
    """The findings in ``after`` and not ``before`` (raised), and the reverse (cleared), by id."""
    if before is after:
        return Delta(raised=(), cleared=())
    old = {finding.id: finding for finding in before}
    new = {finding.id: finding for finding in after}
    return Delta(
        raised=tuple(f for key, f in new.items() if key not in old),
        cleared=tuple(f for key, f in old.items() if key not in new),
    )


@dataclass(frozen=True)
class LinkageFinding(Finding):
    """An identifier value linked to fewer than k sensitive values in some channel's joined view.

    ``views`` is one channel of the minimal level (the first in sort order), ``channels`` every channel
    of that level that discloses it, ``channel_values`` the values each of them links (aligned with
    ``channels``), ``sensitive_values`` those of ``views``, ``joined_on`` the attributes ``views`` joins on.

    ``certain``: in every table instance that yields the views (an identifier naming one tuple), the
    identifier value has one of ``sensitive_values`` (proven per channel, :mod:`streamdetect.checks.certainty`);
    a certain finding's level and channels are those of the lowest proven channels. Otherwise the link is
    *possible*: channels whose views have different selections can link rows that no instance links
    (Yao, Wang & Jajodia 2005, section 5), and a possible finding is never a total disclosure.

    ``searched_below``: None when ``level`` is the minimal level. Over many views the search of the levels
    above the kept ones has a budget (``checks/linkage/beyond.py``): a value it stopped for is reported in
    the lowest channel found, and no channel below ``searched_below`` discloses it; the levels from there
    to ``level`` were not all searched.
    """

    k: int
    identifier_attribute: str
    identifier_value: Scalar
    sensitive_attribute: str
    sensitive_values: tuple[Scalar, ...]
    views: tuple[str, ...]
    channels: tuple[tuple[str, ...], ...]
    certain: bool = True
    channel_values: tuple[tuple[Scalar, ...], ...] = ()
    joined_on: tuple[str, ...] = ()
    searched_below: int | None = None

    check = "linkage"

    @property
    def subject(self) -> tuple[Any, ...]:
        """What the finding is about, apart from its evidence: (check, E, e, S)."""
        return (self.check, self.identifier_attribute, self.identifier_value, self.sensitive_attribute)

    @property
    def level(self) -> int:
        """The minimal level: the number of views of the smallest disclosing channel."""
        return len(self.views)

    @property
    def closure_level(self) -> int:
        """The minimal level."""
        return self.level

    @property
    def order_key(self) -> tuple[object, ...]:
        """Report order: by minimal level, channel, attributes, then value."""
        return (self.level, self.views, self.identifier_attribute, self.sensitive_attribute, str(self.identifier_value))

    @property
    def total(self) -> bool:
        """True for a certain link to a single sensitive value (a total disclosure)."""
        return self.certain and len(self.sensitive_values) == 1

    def headline(self) -> str:
        """E=e -> S {values} via {views}."""
        values = ", ".join(value_text(v) for v in self.sensitive_values)
        return (
            f"{self.identifier_attribute}={value_text(self.identifier_value)} -> "
            f"{self.sensitive_attribute} {{{values}}} via {{{', '.join(self.views)}}}"
        )

    @property
    def channels_shown(self) -> tuple[tuple[str, ...], ...]:
        """Every channel that discloses it."""
        return self.channels

    def verdict(self) -> str:
        """Its kind, level and join attributes."""
        kind = "possible link" if not self.certain else ("total disclosure" if self.total else "partial")
        verdict = f"{kind} at level {self.level}, joined on {', '.join(self.joined_on) or 'one view'}"
        if self.searched_below is not None:
            verdict += (
                f" (lowest channel found; none below level {self.searched_below}, the levels above not all searched)"
            )
        return verdict

    def to_dict(self) -> dict[str, Any]:
        """The documented JSON form (docs/report-format.md)."""
        body = _association(self)
        body["channels"] = [list(channel) for channel in self.channels]
        body["channel_values"] = [
            [json_scalar(value) for value in values] for values in (self.channel_values or (self.sensitive_values,))
        ]
        body["joined_on"] = list(self.joined_on)
        body["level"] = self.level
        body["certain"] = self.certain
        if self.searched_below is not None:
            body["searched_below"] = self.searched_below
        return self._identified(body)

    def _body_text(self) -> str:
        """:meth:`to_dict`'s body as :func:`canonical_json` writes it (keys sorted), from the raw fields in
        one C-encoder call (:data:`raw_canonical`): no document of JSON scalars built first, and a stream
        update can raise and clear a thousand linkage findings (a property test checks the two texts are
        equal). 1.6x faster than the f-string of per-value texts it replaces (7.9 against 12.7 us)."""
        return raw_canonical(
            {
                "certain": self.certain,
                "channel_values": self.channel_values or (self.sensitive_values,),
                "channels": self.channels,
                "check": self.check,
                "identifier": {"attribute": self.identifier_attribute, "value": self.identifier_value},
                "joined_on": self.joined_on,
                "k": self.k,
                "level": self.level,
                **({} if self.searched_below is None else {"searched_below": self.searched_below}),
                "sensitive": {"attribute": self.sensitive_attribute, "values": self.sensitive_values},
                "views": self.views,
            }
        )


@dataclass(frozen=True)
class AssociationCoverFinding(Finding):
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

    @property
    def subject(self) -> tuple[Any, ...]:
        """What the finding is about: (check, E, e, S, the cover's values)."""
        return (
            self.check,
            self.identifier_attribute,
            self.identifier_value,
            self.sensitive_attribute,
            frozenset(self.sensitive_values),
        )

    @property
    def certain(self) -> bool:
        """An exact cover holds in every instance; a conservative one may not (possible)."""
        return self.exact

    def headline(self) -> str:
        """E=e -> S {values} via {views}."""
        values = ", ".join(value_text(v) for v in self.sensitive_values)
        return (
            f"{self.identifier_attribute}={value_text(self.identifier_value)} -> "
            f"{self.sensitive_attribute} {{{values}}} via {{{', '.join(self.views)}}}"
        )

    def verdict(self) -> str:
        """A cover smaller than k."""
        return f"association cover smaller than k = {self.k}" + ("" if self.exact else " (conservative)")

    def to_dict(self) -> dict[str, Any]:
        """The documented JSON form (docs/report-format.md)."""
        body = _association(self)
        body["exact"] = self.exact
        return self._identified(body)

    def _body_text(self) -> str:
        """:meth:`to_dict`'s body as :func:`canonical_json` writes it, from the raw fields in one C-encoder
        call (:data:`raw_canonical`), as :class:`LinkageFinding`'s: a worker's fold raises and clears
        thousands of covers, each id read at once (a property test checks the two texts are equal)."""
        return raw_canonical(
            {
                "check": self.check,
                "exact": self.exact,
                "identifier": {"attribute": self.identifier_attribute, "value": self.identifier_value},
                "k": self.k,
                "sensitive": {"attribute": self.sensitive_attribute, "values": self.sensitive_values},
                "views": self.views,
            }
        )


@dataclass(frozen=True)
class SindFinding(Finding):
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
    #: The members' canonical JSON array, when the check has it (per-row texts joined: the id of a class of
    #: thousands of members then costs a join and a hash, not a document); None: written from ``members``.
    members_text: str | None = field(default=None, compare=False, repr=False)

    check = "sind"

    @property
    def subject(self) -> tuple[Any, ...]:
        """What the finding is about: (check, P, the members)."""
        return (self.check, self.sensitive_attribute, frozenset(self.members))

    @property
    def certain(self) -> bool:
        """An exact class is a violation in fact; a conservative one may not be (possible)."""
        return self.exact

    @property
    def listed_members(self) -> tuple[Any, ...]:
        """The class's members."""
        return self.members

    def headline(self) -> str:
        """S: class of n."""
        return f"{self.sensitive_attribute}: class of {len(self.members)}"

    def verdict(self) -> str:
        """Why the class does not protect its members."""
        return self.reason

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
        return self._identified(body)

    def _body_text(self) -> str:
        """:meth:`to_dict`'s body as :func:`canonical_json` writes it (keys sorted), with the members'
        array from :attr:`members_text` when given (a property test checks the texts are equal)."""
        members = self.members_text
        if members is None:
            members = "[" + ",".join(member_text(member) for member in self.members) + "]"
        head = raw_canonical(
            {
                "check": self.check,
                "exact": self.exact,
                "k": self.k,
                "members": None,
                "reason": self.reason,
                "sensitive": self.sensitive_attribute,
                "views": self.views,
            }
        )
        # The first '"members":null' is the key's (keys before it are the check, exact and k: no text).
        return head.replace('"members":null', f'"members":{members}', 1)


@dataclass(frozen=True)
class RsindFinding(SindFinding):
    """A block of the RSIND partition found that is smaller than k (section 3.2); never exact."""

    check = "rsind"


class GroupFinding(Finding):
    """A group of rows with equal quasi-identifier values that is smaller than k (``table-k-anonymity``:
    Samarati 2001, k-anonymity of one table), or that holds fewer than l distinct values of a sensitive
    attribute (``l-diversity``: Machanavajjhala et al. 2006, distinct l-diversity), in the base table
    (``view`` None) or in one view. ``group`` is the (attribute, value) pairs of the quasi-identifiers;
    ``count`` its rows; ``distinct`` its distinct sensitive values (l-diversity). Always exact.

    A plain class rather than a frozen dataclass (whose ``__init__`` sets each field through
    ``object.__setattr__``): a table whose quasi-identifiers single out every row yields one finding per
    row (45,222 on BP), and building them is much of the check's time.
    """

    def __init__(  # noqa: PLR0917 -- the fields of a finding, in the order the check has them
        self,
        kind: str,
        k: int,
        relation: str | None,
        attributes: tuple[str, ...],
        values: tuple[Scalar, ...],
        count: int,
        sensitive_attribute: str | None = None,
        distinct: int | None = None,
    ) -> None:
        self.kind = kind
        self.k = k
        self.relation = relation
        self.attributes = attributes  # shared by every finding of the relation
        self.values = values
        self.count = count
        self.sensitive_attribute = sensitive_attribute
        self.distinct = distinct

    @property
    def group(self) -> tuple[tuple[str, Scalar], ...]:
        """The quasi-identifiers' (attribute, value) pairs."""
        return tuple(zip(self.attributes, self.values, strict=True))

    @property
    def check(self) -> str:
        """``table-k-anonymity`` or ``l-diversity``."""
        return self.kind

    @property
    def views(self) -> tuple[str, ...]:
        """The view the group is in (none for the base table)."""
        return () if self.relation is None else (self.relation,)

    @property
    def subject(self) -> tuple[Any, ...]:
        """What the finding is about: (check, relation, group, sensitive attribute)."""
        return (self.kind, self.relation, self.group, self.sensitive_attribute)

    @property
    def certain(self) -> bool:
        """Counted in the rows themselves: always a fact."""
        return True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GroupFinding) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        return f"GroupFinding({self.to_dict()!r})"

    def headline(self) -> str:
        """Relation: {group}."""
        group = ", ".join(f"{name}={value_text(value)}" for name, value in self.group)
        return f"{self.relation or 'table'}: {{{group}}}"

    def verdict(self) -> str:
        """Too few rows, or too few distinct sensitive values."""
        if self.sensitive_attribute is not None:
            return f"{self.distinct} distinct {self.sensitive_attribute} value(s), fewer than l = {self.k}"
        return f"{self.count} row(s), fewer than k = {self.k}"

    def to_dict(self) -> dict[str, Any]:
        """The documented JSON form (docs/report-format.md)."""
        body: dict[str, Any] = {
            "check": self.kind,
            "view": self.relation,
            "group": {name: json_scalar(value) for name, value in self.group},
            "count": self.count,
        }
        if self.kind == "l-diversity":
            body |= {"sensitive": self.sensitive_attribute, "distinct": self.distinct, "l": self.k}
        else:
            body["k"] = self.k
        return self._identified(body)


def finding_from_dict(
    document: dict[str, Any],
) -> LinkageFinding | AssociationCoverFinding | SindFinding | GroupFinding:
    """A finding rebuilt from its JSON form (:meth:`to_dict`), e.g. read back from a saved report.

    Values come back as JSON scalars (dates as ISO strings); everything else is as reported. Raises
    ``KeyError``/``ValueError`` on a document that is not a finding.
    """
    check = document["check"]
    if check in ("linkage", "k-anonymity"):
        # The fields :func:`_association` writes for both kinds.
        shared: dict[str, Any] = {
            "k": int(document["k"]),
            "identifier_attribute": document["identifier"]["attribute"],
            "identifier_value": document["identifier"]["value"],
            "sensitive_attribute": document["sensitive"]["attribute"],
            "sensitive_values": tuple(document["sensitive"]["values"]),
            "views": tuple(document["views"]),
        }
    if check == "linkage":
        return LinkageFinding(
            **shared,
            channels=tuple(tuple(channel) for channel in document["channels"]),
            certain=bool(document.get("certain", True)),
            channel_values=tuple(tuple(values) for values in document.get("channel_values", [])),
            joined_on=tuple(document.get("joined_on", [])),
            searched_below=document.get("searched_below"),
        )
    if check == "k-anonymity":
        return AssociationCoverFinding(
            **shared,
            exact=bool(document["exact"]),
        )
    if check in ("sind", "rsind"):
        kind = SindFinding if check == "sind" else RsindFinding
        return kind(
            k=int(document["k"]),
            sensitive_attribute=document["sensitive"],
            members=tuple(tuple(member.items()) for member in document["members"]),
            views=tuple(document["views"]),
            reason=document["reason"],
            exact=bool(document["exact"]),
        )
    if check in ("table-k-anonymity", "l-diversity"):
        diverse = check == "l-diversity"
        return GroupFinding(
            check,
            int(document["l" if diverse else "k"]),
            document["view"],
            tuple(document["group"]),
            tuple(document["group"].values()),
            int(document["count"]),
            document["sensitive"] if diverse else None,
            int(document["distinct"]) if diverse else None,
        )
    raise ValueError(f"unknown check {check!r}")
