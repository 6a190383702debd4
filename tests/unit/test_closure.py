"""The leveled closure: connected view sets by size (Dou & Coulondre, Algorithm 1 as read in docs)."""

from __future__ import annotations

from streamdetect.model.topology import ViewDefinition
from streamdetect.relational.closure import channels_by_level, view_graph
from tests.reference import channels as reference_channels

BP = {
    "v1": ("NationalId", "Birthday", "Gender"),
    "v2": ("Givenname", "Zipcode", "Education"),
    "v3": ("Zipcode", "Company", "CCType"),
    "v4": ("Gender", "CCType", "Password"),
    "v5": ("Birthday", "Zipcode", "Health Condition"),
    "v6": ("Givenname", "CCType", "Birthday"),
}


def _views(schemas: dict[str, tuple[str, ...]]) -> list[ViewDefinition]:
    return [ViewDefinition(name, attributes) for name, attributes in schemas.items()]


def test_dou_chain_has_no_v3_v5_channel() -> None:
    schemas = {"v3": ("SSN", "DOB", "Sex"), "v4": ("ZIP", "DOB", "Job"), "v5": ("ZIP", "Job", "Disease")}
    levels = channels_by_level(_views(schemas), ["SSN", "ZIP", "DOB", "Sex", "Job", "Disease"])
    assert [[c.views for c in level] for level in levels] == [
        [("v3",), ("v4",), ("v5",)],
        [("v3", "v4"), ("v4", "v5")],
        [("v3", "v4", "v5")],
    ]
    assert levels[2][0].attributes == ("SSN", "ZIP", "DOB", "Sex", "Job", "Disease")


def test_bp_closure_equals_connected_subsets() -> None:
    order = sorted({a for schema in BP.values() for a in schema})
    levels = channels_by_level(_views(BP), order)
    found = [c.views for level in levels for c in level]
    assert found == reference_channels(BP)
    assert view_graph(_views(BP)).number_of_edges() == 11


def test_max_level_bounds_the_closure() -> None:
    order = sorted({a for schema in BP.values() for a in schema})
    assert len(channels_by_level(_views(BP), order, max_level=2)) == 2
