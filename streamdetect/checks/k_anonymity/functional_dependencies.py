"""Which functional dependencies matter for k-anonymity by views (Yao, Wang & Jajodia 2005, 6.1).

An FD A1 -> A2 is *across* views v1 and v2 when v1 holds A1 (projected or in its selection) and v2
holds A2. It is *ineffective* for the view set (the minimal association covers are the same with and
without it) when, for every pair of views, it is not across them, or they have the same selection and
one of them holds both A1 and A2, or they have the same selection and A1 -> A3, A3 -> A2 with A3 in
both. Only the listed sufficient conditions are used: an FD not shown ineffective counts as effective,
which sends the check to the conservative method, never to a wrong exact one.
"""

from __future__ import annotations

from collections.abc import Sequence

from streamdetect.model.topology import FunctionalDependency, ViewDefinition


def _holds(view: ViewDefinition, attributes: Sequence[str]) -> bool:
    present = set(view.attributes) | view.selection_attributes
    return all(a in present for a in attributes)


def _single(dependencies: Sequence[FunctionalDependency]) -> set[tuple[tuple[str, ...], str]]:
    return {(fd.lhs, right) for fd in dependencies for right in fd.rhs}


def effective_dependencies(
    views: Sequence[ViewDefinition], dependencies: Sequence[FunctionalDependency]
) -> list[FunctionalDependency]:
    """The FDs not shown ineffective by section 6.1's conditions. O(|FDs| · |views|² · |attributes|)."""
    singles = _single(dependencies)
    effective = []
    for fd in dependencies:
        for right in fd.rhs:
            if not all(
                _ineffective_for_pair(fd.lhs, right, left_view, right_view, singles)
                for left_view in views
                for right_view in views
                if left_view is not right_view
            ):
                effective.append(FunctionalDependency(fd.lhs, (right,)))
    return effective


def _ineffective_for_pair(
    lhs: tuple[str, ...],
    right: str,
    first: ViewDefinition,
    second: ViewDefinition,
    singles: set[tuple[tuple[str, ...], str]],
) -> bool:
    across = _holds(first, lhs) and _holds(second, [right])
    if not across:
        return True
    if first.where != second.where:
        return False
    if _holds(first, [*lhs, right]) or _holds(second, [*lhs, right]):
        return True
    shared = (set(first.attributes) & set(second.attributes)) - {right, *lhs}
    return any((lhs, middle) in singles and ((middle,), right) in singles for middle in shared)
