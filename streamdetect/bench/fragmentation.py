"""Random fragmentation problems at the scales of De Capitani di Vimercati et al. (VLDB 2010, Appendix B:
40 attributes with 16 constraints and requirements, 2,500 with 2,000), and their timing.

The paper's generator is not published; this one plants a solution so that the instance is satisfiable
and the solver's search, not an early contradiction, is timed: attributes are dealt into ``groups``
hidden fragments, every constraint spans at least two groups (so none lies inside a hidden fragment),
and every requirement has a term inside one group (a conjunction of one to three of its attributes),
ORed with a random term half of the time.
"""

from __future__ import annotations

import random
import statistics
import time
from typing import Any

from streamdetect.model.visibility import All, Attribute, Formula, VisibilityRequirement
from streamdetect.model.visibility import Any as AnyOf
from streamdetect.remediation.fragmentation import minimal_fragmentation, violations


def _text(formula: Formula) -> str:
    if isinstance(formula, Attribute):
        return formula.name
    joiner = " AND " if isinstance(formula, All) else " OR "
    return "(" + joiner.join(_text(operand) for operand in formula.operands) + ")"


def _term(rng: random.Random, names: list[str]) -> Formula:
    chosen = rng.sample(names, min(len(names), rng.randint(1, 3)))
    return Attribute(chosen[0]) if len(chosen) == 1 else All(tuple(Attribute(name) for name in chosen))


def random_problem(
    attributes: int, constraints: int, requirements: int, *, groups: int = 4, seed: int = 0
) -> tuple[list[str], list[tuple[str, ...]], list[VisibilityRequirement]]:
    """A satisfiable problem: schema, constraints and requirements (module docstring). O(sizes)."""
    rng = random.Random(seed)
    names = [f"a{i}" for i in range(attributes)]
    hidden = [names[g::groups] for g in range(groups)]
    group_of = {name: g for g, members in enumerate(hidden) for name in members}
    chosen_constraints: list[tuple[str, ...]] = []
    while len(chosen_constraints) < constraints:
        candidate = tuple(rng.sample(names, rng.randint(2, 3)))
        if len({group_of[name] for name in candidate}) > 1:
            chosen_constraints.append(candidate)
    chosen_requirements = []
    for _ in range(requirements):
        formula = _term(rng, rng.choice(hidden))
        if rng.random() < 0.5:
            formula = AnyOf((formula, _term(rng, names)))
        chosen_requirements.append(VisibilityRequirement(_text(formula), formula))
    return names, chosen_constraints, chosen_requirements


def time_fragmentation(
    attributes: int, constraints: int, requirements: int, *, repeat: int = 5, seed: int = 0
) -> dict[str, Any]:
    """Median wall time of :func:`minimal_fragmentation` (encoding and solving) over ``repeat`` runs of
    one seeded problem, and what it found."""
    names, chosen_constraints, chosen_requirements = random_problem(attributes, constraints, requirements, seed=seed)
    times = []
    result = None
    for _ in range(repeat):
        began = time.perf_counter()
        result = minimal_fragmentation(names, chosen_constraints, chosen_requirements)
        times.append(time.perf_counter() - began)
    assert result is not None
    assert result.fragments is not None
    assert not violations(result.fragments, chosen_constraints, chosen_requirements)
    return {
        "attributes": attributes,
        "constraints": constraints,
        "requirements": requirements,
        "seed": seed,
        "fragments": len(result.fragments),
        "tried": list(result.tried),
        "seconds": {"median": statistics.median(times), "min": min(times), "max": max(times), "runs": times},
    }
