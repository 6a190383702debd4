"""A linkage finding's canonical text, written directly for speed, is the text its document serialises
to: ids and finding events stay what they were."""

from __future__ import annotations

import datetime as dt
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from streamdetect.checks.findings import LinkageFinding, canonical_json, stable_id

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
