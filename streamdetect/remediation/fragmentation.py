"""Minimal correct fragmentation by SAT (De Capitani di Vimercati et al., VLDB 2010, section 4 and
Appendix A).

A fragmentation is a set of attribute sets. It is *safe* when no fragment contains a confidentiality
constraint and no two fragments share an attribute (Definition 2.3), *correct* when it is safe and every
visibility requirement is satisfied by one fragment (Definitions 3.2, 4.1), *minimal* when no correct
fragmentation has fewer fragments (Problem 4.1, NP-hard by Theorem 4.1). Following Theorem A.1, a
correct fragmentation of ``m`` fragments is a model of

* ``phi_C1``: for each constraint ``c`` and fragment ``i``, not all of ``c``'s attributes in ``i``;
* ``phi_C2``: each attribute in at most one fragment;
* ``phi_V``: each requirement ``v`` true in some fragment ``i`` (``v`` with every attribute ``a``
  replaced by ``a^i``; encoded by Tseitin variables, one direction suffices as ``v`` is monotonic);
* ``phi_min``: attributes that no requirement mentions in no fragment (only requested data is released);

and ``m = 1, 2, ...`` is tried until the formula is satisfiable. Readings (docs/remediation.md):

* the search stops at ``min(|V|, attributes mentioned by V)``: a fragment of a minimal correct
  fragmentation satisfies some requirement (else dropping it leaves a correct one) and holds a requested
  attribute. The paper also lists ``|C|``, which is too small: one constraint ``{A, B}`` with the
  requirements ``A`` and ``B`` needs two fragments.
* fragment 1 is made to satisfy the first requirement (fragments are interchangeable), which spares
  the solver proofs of unsatisfiability that only permute fragments.
* when no correct fragmentation exists, the clash is a minimal unsatisfiable set of constraints and
  requirements (an unsatisfiable core under selector literals, shrunk by deletion), so the publisher
  sees which constraints forbid which requirements.

Pure: no I/O. The solver is python-sat's Glucose 4 (incremental, with assumptions and cores).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pysat.card import CardEnc, EncType
from pysat.formula import IDPool
from pysat.solvers import Solver

from streamdetect.model.visibility import (
    All,
    Any,
    Attribute,
    Formula,
    VisibilityRequirement,
    attributes_in,
    satisfied_by,
)

#: python-sat's name of the solver used (it supports assumptions and unsatisfiable cores).
SOLVER = "glucose4"


@dataclass(frozen=True)
class Clash:
    """Why no correct fragmentation exists: constraints and requirements that cannot hold together
    (minimal: dropping any one of them leaves a set that some fragmentation satisfies)."""

    constraints: tuple[tuple[str, ...], ...]
    requirements: tuple[str, ...]

    def describe(self) -> str:
        """One sentence naming the clashing constraints and requirements."""
        constraints = ", ".join("{" + ", ".join(c) + "}" for c in self.constraints) or "none"
        requirements = ", ".join(repr(r) for r in self.requirements)
        if len(self.requirements) == 1 and not self.constraints:
            return f"requirement {requirements} cannot be satisfied"
        if len(self.requirements) == 1:
            return (
                f"requirement {requirements} cannot be satisfied without a fragment containing "
                f"constraint(s) {constraints}"
            )
        return (
            f"requirements {requirements} cannot all be satisfied by disjoint fragments that contain none of "
            f"the constraints {constraints}"
        )


@dataclass(frozen=True)
class FragmentationResult:
    """A minimal correct fragmentation (``fragments``: attributes in schema order, fragments ordered by
    their first attribute), or ``None`` with the ``clash`` that prevents one. ``tried``: the numbers of
    fragments the solver was asked for."""

    fragments: tuple[tuple[str, ...], ...] | None
    clash: Clash | None = None
    tried: tuple[int, ...] = field(default=())

    @property
    def reason(self) -> str | None:
        """Why there is no fragmentation, in one sentence (None when there is one)."""
        return None if self.clash is None else f"no correct fragmentation exists: {self.clash.describe()}"


def well_defined(constraints: Iterable[Iterable[str]]) -> tuple[tuple[str, ...], ...]:
    """The constraints without duplicates and without those that contain another (section 2: a
    constraint holding whenever a smaller one holds is redundant), in their first order. Each set is
    compared only with the sets whose first attribute it holds: O(sum over constraints of |c| times
    the constraints starting with one of c's attributes)."""
    unique: dict[frozenset[str], tuple[str, ...]] = {}
    for constraint in constraints:
        names = tuple(dict.fromkeys(constraint))
        unique.setdefault(frozenset(names), names)
    by_first: dict[str, list[frozenset[str]]] = {}
    for members, names in unique.items():
        by_first.setdefault(names[0], []).append(members)
    return tuple(
        names
        for members, names in unique.items()
        if not any(other < members for name in names for other in by_first.get(name, ()))
    )


def violations(
    fragments: Sequence[Iterable[str]],
    constraints: Sequence[Iterable[str]],
    requirements: Sequence[VisibilityRequirement],
) -> list[str]:
    """Why ``fragments`` is not correct (Definitions 2.3, 3.2, 4.1), one sentence per violation; empty
    when it is correct. The reference the SAT answer is re-checked against. O(|F|^2 |S| + |F| (|C| + |V|))."""
    sets = [frozenset(fragment) for fragment in fragments]
    problems: list[str] = []
    for i, fragment in enumerate(sets):
        for constraint in constraints:
            if set(constraint) <= fragment:
                problems.append(f"fragment {i + 1} contains constraint {{{', '.join(constraint)}}}")
        for j in range(i + 1, len(sets)):
            shared = fragment & sets[j]
            if shared:
                problems.append(f"fragments {i + 1} and {j + 1} share {', '.join(sorted(shared))}")
    for requirement in requirements:
        if not any(satisfied_by(requirement.formula, fragment) for fragment in sets):
            problems.append(f"no fragment satisfies {requirement.text!r}")
    return problems


class _Encoding:
    """``phi^m`` of Theorem A.1 in one incremental solver, each constraint and requirement guarded by a
    selector literal (assumed true) so that an unsatisfiable answer names a core."""

    def __init__(
        self,
        attributes: Sequence[str],
        constraints: Sequence[tuple[str, ...]],
        requirements: Sequence[VisibilityRequirement],
        m: int,
    ) -> None:
        self.pool = IDPool()
        self.m = m
        self.solver = Solver(name=SOLVER)
        requested = {name for r in requirements for name in attributes_in(r.formula)}
        # phi_min: unrequested attributes get no variable at all, so they are in no fragment.
        self.attributes = [a for a in attributes if a in requested]
        self.constraint_selectors = [self.pool.id(("c", j)) for j in range(len(constraints))]
        self.requirement_selectors = [self.pool.id(("v", j)) for j in range(len(requirements))]
        for a in self.attributes:  # phi_C2
            literals = [self._var(a, i) for i in range(m)]
            if m > 1:
                encoding = EncType.pairwise if m <= 6 else EncType.seqcounter
                self.solver.append_formula(CardEnc.atmost(literals, 1, vpool=self.pool, encoding=encoding).clauses)
        for j, constraint in enumerate(constraints):  # phi_C1
            if all(a in requested for a in constraint):  # otherwise an attribute of it is never released
                for i in range(m):
                    self.solver.add_clause([-self.constraint_selectors[j]] + [-self._var(a, i) for a in constraint])
        for j, requirement in enumerate(requirements):  # phi_V
            holds = [self._holds(requirement.formula, i) for i in range(m)]
            self.solver.add_clause([-self.requirement_selectors[j], *holds])
        if requirements:  # symmetry: fragment 1 satisfies the first requirement
            self.solver.add_clause([-self.requirement_selectors[0], self._holds(requirements[0].formula, 0)])

    def _var(self, attribute: str, fragment: int) -> int:
        return int(self.pool.id(("a", attribute, fragment)))

    def _holds(self, formula: Formula, fragment: int) -> int:
        """A literal that implies ``formula`` holds in ``fragment`` (Tseitin, implication only)."""
        if isinstance(formula, Attribute):
            return self._var(formula.name, fragment)
        literal = int(self.pool.id(("f", id(formula), fragment)))
        children = [self._holds(operand, fragment) for operand in formula.operands]
        if isinstance(formula, All):
            for child in children:
                self.solver.add_clause([-literal, child])
        else:
            assert isinstance(formula, Any)
            self.solver.add_clause([-literal, *children])
        return literal

    def solve(self, constraints: Iterable[int] | None = None, requirements: Iterable[int] | None = None) -> bool:
        """Satisfiable with the given constraints and requirements (indexes; all when None) in force?"""
        chosen_c = range(len(self.constraint_selectors)) if constraints is None else constraints
        chosen_v = range(len(self.requirement_selectors)) if requirements is None else requirements
        assumptions = [self.constraint_selectors[j] for j in chosen_c] + [
            self.requirement_selectors[j] for j in chosen_v
        ]
        return bool(self.solver.solve(assumptions=assumptions))

    def fragments(self, order: Sequence[str]) -> tuple[tuple[str, ...], ...]:
        model = {lit for lit in (self.solver.get_model() or []) if lit > 0}
        rank = {name: position for position, name in enumerate(order)}
        fragments = [
            tuple(sorted((a for a in self.attributes if self._var(a, i) in model), key=rank.__getitem__))
            for i in range(self.m)
        ]
        return tuple(sorted((f for f in fragments if f), key=lambda f: rank[f[0]]))

    def core(self) -> tuple[list[int], list[int]]:
        """The constraints and requirements (indexes) of the last unsatisfiable answer's core."""
        core = set(self.solver.get_core() or [])
        return (
            [j for j, s in enumerate(self.constraint_selectors) if s in core],
            [j for j, s in enumerate(self.requirement_selectors) if s in core],
        )

    def close(self) -> None:
        self.solver.delete()


def minimal_fragmentation(
    attributes: Sequence[str],
    constraints: Iterable[Iterable[str]],
    requirements: Sequence[VisibilityRequirement],
) -> FragmentationResult:
    """A correct fragmentation with the fewest fragments (Problem 4.1), or why none exists.

    ``attributes``: the schema, in the order fragments list them. Exact (the SAT answer is re-checked
    against :func:`violations`). Cost: one SAT call per number of fragments tried, each over
    ``m * |S|`` attribute variables plus one Tseitin variable per formula node and fragment;
    NP-hard in general, milliseconds on the paper's scales (docs/benchmarks.md).
    """
    kept = well_defined(constraints)
    if not requirements:
        return FragmentationResult(fragments=(), tried=())
    requested = {name for r in requirements for name in attributes_in(r.formula)}
    bound = max(1, min(len(requirements), len(requested)))
    tried: list[int] = []
    for m in range(1, bound + 1):
        tried.append(m)
        encoding = _Encoding(attributes, kept, requirements, m)
        try:
            if encoding.solve():
                fragments = encoding.fragments(attributes)
                problems = violations(fragments, kept, requirements)
                if problems:  # never offer an unsafe answer: the encoding would be wrong
                    raise AssertionError(f"SAT fragmentation {fragments} is not correct: {problems}")
                return FragmentationResult(fragments=fragments, tried=tuple(tried))
            if m in (1, bound):
                clash = _clash(encoding, kept, requirements, solo=m < bound)
                if clash is not None:
                    return FragmentationResult(fragments=None, clash=clash, tried=tuple(tried))
        finally:
            encoding.close()
    raise AssertionError("unreachable: the last number of fragments tried reports its clash")


def _clash(
    encoding: _Encoding,
    constraints: Sequence[tuple[str, ...]],
    requirements: Sequence[VisibilityRequirement],
    *,
    solo: bool,
) -> Clash | None:
    """The minimal clash behind the encoding's unsatisfiable answer. With ``solo`` (one fragment, more to
    try), only a requirement that no single fragment can satisfy is a clash (more fragments cannot help
    it); otherwise None, and the search goes on (one SAT call per requirement). Deletion-based: one SAT
    call per core member."""
    core_c, core_v = encoding.core()
    if solo:
        # The core's requirements first (the likely culprits), then the others; stop at the first.
        order = core_v + [j for j in range(len(requirements)) if j not in set(core_v)]
        alone = next((j for j in order if not encoding.solve(requirements=[j])), None)
        if alone is None:
            return None
        core_v = [alone]
        if encoding.solve(constraints=core_c, requirements=core_v):  # the core had other requirements
            core_c = list(range(len(constraints)))
    for kind in ("v", "c"):  # shrink: drop each member whose removal keeps it unsatisfiable
        members = core_v if kind == "v" else core_c
        for j in list(members):
            trial = [x for x in members if x != j]
            c, v = (core_c, trial) if kind == "v" else (trial, core_v)
            if not encoding.solve(constraints=c, requirements=v):
                members[:] = trial
    return Clash(
        constraints=tuple(constraints[j] for j in core_c),
        requirements=tuple(requirements[j].text for j in core_v),
    )
