"""K-MSD and K-MSD-AG (Huang et al. 2014): every table they produce is k-anonymous on the
quasi-identifiers (Theorem 4, checked by counting), K-MSD-AG keeps every functional dependency among
them that held (Theorem 6), and every value is a generalization of its original along its hierarchy."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from streamdetect.model.hierarchies import mapping, mask
from streamdetect.remediation.kmsd import k_msd, k_msd_ag, prepare

QUASI = ["Zip", "Region", "Dept", "Phone"]
HIERARCHIES = {
    "Zip": mask(),
    "Region": mapping([{"a1": "A", "a2": "A", "b1": "B", "b2": "B"}]),
    "Dept": mapping([{"d1": "D", "d2": "D", "e1": "E"}]),
    "Phone": mask(),
}


@st.composite
def tables(draw: st.DrawFn) -> dict[str, list[Any]]:
    n = draw(st.integers(2, 30))
    depts = draw(st.lists(st.sampled_from(["d1", "d2", "e1"]), min_size=n, max_size=n))
    # Dept -> Phone holds in the data: one phone per department.
    phones = {d: draw(st.sampled_from(["5551", "5552", "5561"])) for d in ("d1", "d2", "e1")}
    return {
        "Zip": draw(st.lists(st.sampled_from(["0213", "0214", "0221", None]), min_size=n, max_size=n)),
        "Region": draw(st.lists(st.sampled_from(["a1", "a2", "b1", "b2"]), min_size=n, max_size=n)),
        "Dept": depts,
        "Phone": [phones[d] for d in depts],
    }


def _holds(columns: dict[str, list[Any]], lhs: str, rhs: str) -> bool:
    seen: dict[Any, set[Any]] = defaultdict(set)
    for x, y in zip(columns[lhs], columns[rhs], strict=True):
        seen[x].add(y)
    return all(len(v) == 1 for v in seen.values())


@settings(max_examples=200, deadline=None)
@given(tables(), st.integers(2, 4), st.booleans())
def test_outputs_are_k_anonymous_and_k_msd_ag_keeps_the_fd(columns: dict[str, list[Any]], k: int, ag: bool) -> None:
    n = len(columns["Zip"])
    if n < k:
        return
    table = prepare(columns, HIERARCHIES)
    if ag:
        k_msd_ag(table, QUASI, k, [(("Dept",), ("Phone",))])
    else:
        k_msd(table, QUASI, k)
    out = {a: table.column(a) for a in QUASI}
    groups = Counter(tuple(out[a][i] for a in QUASI) for i in range(n))
    assert min(groups.values()) >= k
    if ag:
        assert _holds(out, "Dept", "Phone")
    for a in QUASI:  # a generalization of the original, along its hierarchy
        for i in range(n):
            original = columns[a][i]
            reachable = {HIERARCHIES[a].generalize(original, level) for level in range(0, 8)}
            assert out[a][i] in reachable
