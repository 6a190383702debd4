"""A linkage (an association cover's, a SIND) finding's canonical text, written directly for speed, is the
text its document serialises to: ids and finding events stay what they were."""

from __future__ import annotations

import datetime as dt
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from streamdetect.checks.canonical import canonical_json, member_text, stable_id
from streamdetect.checks.findings import AssociationCoverFinding, LinkageFinding, RsindFinding, SindFinding

scalars = st.one_of(
    st.text(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.dates(),
    st.datetimes(),
)
names = st.text(min_size=1, max_size=8)
channels = st.lists(st.lists(names, min_size=1, max_size=4).map(tuple), min_size=1, max_size=3).map(tuple)


@st.composite
def findings(draw: st.DrawFn) -> LinkageFinding:
    members = draw(channels)
    values = tuple(draw(st.lists(scalars, min_size=1, max_size=3)))
    channel_values = draw(
        st.one_of(st.just(()), st.lists(st.lists(scalars, max_size=3).map(tuple), min_size=1, max_size=3).map(tuple))
    )
    return LinkageFinding(
        k=draw(st.integers(min_value=2, max_value=10)),
        identifier_attribute=draw(names),
        identifier_value=draw(scalars),
        sensitive_attribute=draw(names),
        sensitive_values=values,
        views=members[0],
        channels=members,
        certain=draw(st.booleans()),
        channel_values=channel_values,
        joined_on=tuple(draw(st.lists(names, max_size=3))),
    )


@settings(max_examples=300, deadline=None)
@given(findings())
def test_the_direct_text_is_the_documents_canonical_text(finding: LinkageFinding) -> None:
    document = LinkageFinding(**{name: getattr(finding, name) for name in finding.__dataclass_fields__}).to_dict()
    body = {key: value for key, value in document.items() if key != "id"}
    assert finding._body_text() == canonical_json(body)
    assert finding.id == document["id"] == stable_id(body)
    # The event form: the document itself, id first.
    assert json.loads(finding.json_text) == json.loads(json.dumps(document))
    assert finding.json_text.startswith('{"id":')


def test_a_date_value_is_its_iso_text() -> None:
    finding = LinkageFinding(2, "Birthday", dt.date(1990, 5, 1), "Disease", ("Flu",), ("v1", "v2"), (("v1", "v2"),))
    assert '"value":"1990-05-01"' in finding._body_text()


@st.composite
def sind_findings(draw: st.DrawFn) -> SindFinding:
    attributes = draw(st.lists(names, min_size=1, max_size=4, unique=True))
    members = tuple(
        tuple((name, draw(scalars)) for name in attributes) for _ in range(draw(st.integers(min_value=1, max_value=5)))
    )
    kind = draw(st.sampled_from([SindFinding, RsindFinding]))
    finding = kind(
        k=draw(st.integers(min_value=2, max_value=10)),
        sensitive_attribute=draw(names),
        members=members,
        views=tuple(draw(st.lists(names, max_size=3))),
        reason=draw(st.text()),
        exact=draw(st.booleans()),
    )
    if draw(st.booleans()):  # as the SIND check builds them: the members' texts joined
        text = "[" + ",".join(member_text(member) for member in members) + "]"
        finding = kind(**{**{n: getattr(finding, n) for n in finding.__dataclass_fields__}, "members_text": text})
    return finding


@settings(max_examples=300, deadline=None)
@given(sind_findings())
def test_a_sind_findings_direct_text_is_the_documents_canonical_text(finding: SindFinding) -> None:
    """Members given as joined per-row texts (the check's cache) or written from the members, reasons
    holding anything (a '"members":null' among them): the text the document serialises to."""
    document = finding.to_dict()
    body = {key: value for key, value in document.items() if key != "id"}
    assert finding._body_text() == canonical_json(body)
    assert finding.id == stable_id(body)


@st.composite
def cover_findings(draw: st.DrawFn) -> AssociationCoverFinding:
    return AssociationCoverFinding(
        k=draw(st.integers(min_value=2, max_value=10)),
        identifier_attribute=draw(names),
        identifier_value=draw(scalars),
        sensitive_attribute=draw(names),
        sensitive_values=tuple(draw(st.lists(scalars, max_size=3))),
        views=tuple(draw(st.lists(names, max_size=3))),
        exact=draw(st.booleans()),
    )


@settings(max_examples=300, deadline=None)
@given(cover_findings())
def test_an_association_covers_direct_text_is_the_documents_canonical_text(finding: AssociationCoverFinding) -> None:
    """Read from a fresh finding, whose id comes from the direct text, and from the document."""
    fresh = AssociationCoverFinding(**{name: getattr(finding, name) for name in finding.__dataclass_fields__})
    document = finding.to_dict()
    body = {key: value for key, value in document.items() if key != "id"}
    assert fresh._body_text() == canonical_json(body)
    assert fresh.id == document["id"] == stable_id(body)
    assert json.loads(fresh.json_text) == json.loads(json.dumps(document))
