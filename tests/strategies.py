"""Hypothesis strategies shared by property tests."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st


@st.composite
def roles(draw: st.DrawFn, pool: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """``(attributes, identifiers, sensitive)``: three or more attributes of ``pool``, one or two of them
    identifiers, one or two others sensitive."""
    attributes = draw(st.lists(st.sampled_from(pool), min_size=3, max_size=len(pool), unique=True))
    identifiers = draw(st.lists(st.sampled_from(attributes), min_size=1, max_size=2, unique=True))
    rest = [a for a in attributes if a not in identifiers]
    sensitive = draw(st.lists(st.sampled_from(rest), min_size=1, max_size=2, unique=True))
    return tuple(attributes), tuple(identifiers), tuple(sensitive)
