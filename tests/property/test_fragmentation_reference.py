"""Minimal fragmentation by SAT against brute force over every fragmentation of small schemas
(De Capitani di Vimercati et al. 2010, Definitions 2.3, 3.2, 4.1 and Problem 4.1)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from streamdetect.model.visibility import All, Any, Attribute, Formula, VisibilityRequirement, attributes_in
from streamdetect.remediation.fragmentation import minimal_fragmentation, violations, well_defined

NAMES = ["A", "B", "C", "D", "E"]


def _text(formula: Formula) -> str:
    if isinstance(formula, Attribute):
        return formula.name
    joiner = " AND " if isinstance(formula, All) else " OR "
    return "(" + joiner.join(_text(o) for o in formula.operands) + ")"


@st.composite
def formulas(draw: st.DrawFn, names: Sequence[str], depth: int = 2) -> Formula:
    if depth == 0 or draw(st.booleans()):
        return Attribute(draw(st.sampled_from(names)))
    operands = tuple(draw(st.lists(formulas(names, depth - 1), min_size=2, max_size=3)))
    return All(operands) if draw(st.booleans()) else Any(operands)


@st.composite
def problems(draw: st.DrawFn) -> tuple[list[str], list[tuple[str, ...]], list[VisibilityRequirement]]:
    names = NAMES[: draw(st.integers(3, 5))]
    constraints = draw(
        st.lists(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True).map(tuple), max_size=4)
    )
    chosen = draw(st.lists(formulas(names), min_size=1, max_size=4))
    return names, constraints, [VisibilityRequirement(_text(f), f) for f in chosen]


def _smallest(constraints: Sequence[tuple[str, ...]], requirements: Sequence[VisibilityRequirement]) -> int | None:
    """The fewest fragments of a correct fragmentation, by trying every labelling of the requested
    attributes with a fragment or none; None when no fragmentation is correct."""
    if not requirements:
        return 0  # the empty fragmentation releases nothing and requires nothing
    requested = sorted({a for r in requirements for a in attributes_in(r.formula)})
    for m in range(1, len(requested) + 1):
        for labels in itertools.product(range(m + 1), repeat=len(requested)):
            fragments = [[a for a, label in zip(requested, labels, strict=True) if label == i] for i in range(1, m + 1)]
            if all(fragments) and not violations(fragments, constraints, requirements):
                return m
    return None


@settings(max_examples=300, deadline=None)
@given(problems())
def test_sat_fragmentation_is_correct_and_minimal(
    problem: tuple[list[str], list[tuple[str, ...]], list[VisibilityRequirement]],
) -> None:
    names, constraints, requirements = problem
    result = minimal_fragmentation(names, constraints, requirements)
    smallest = _smallest(constraints, requirements)
    if smallest is None:
        assert result.fragments is None
        assert result.clash is not None
        # The clash is unsatisfiable, and minimal: without any one member something satisfies it.
        kept = well_defined(constraints)
        clash_c = list(result.clash.constraints)
        by_text = {r.text: r for r in requirements}  # equal texts are equal requirements
        clash_v = [by_text[text] for text in result.clash.requirements]
        assert set(clash_c) <= set(kept)
        assert _smallest(clash_c, clash_v) is None
        for i in range(len(clash_c)):
            assert _smallest(clash_c[:i] + clash_c[i + 1 :], clash_v) is not None
        for i in range(len(clash_v)):
            assert _smallest(clash_c, clash_v[:i] + clash_v[i + 1 :]) is not None
    else:
        assert result.fragments is not None
        assert violations(result.fragments, constraints, requirements) == []
        assert len(result.fragments) == smallest
        requested = {a for r in requirements for a in attributes_in(r.formula)}
        assert {a for f in result.fragments for a in f} <= requested  # phi_min: nothing unrequested released


def test_one_constraint_can_need_two_fragments() -> None:
    """The paper's search bound min(|C|, ...) would stop at one fragment here; two are needed."""
    requirements = [VisibilityRequirement(n, Attribute(n)) for n in ("A", "B")]
    result = minimal_fragmentation(["A", "B"], [("A", "B")], requirements)
    assert result.fragments == (("A",), ("B",))
