"""Table k-anonymity and distinct l-diversity against brute force from the definitions, over random
streams of additions and withdrawals; the state rebuilt from its pieces and from its codec agrees; and
pycanon (the library users compare against) measures the same k and l on the same table."""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

import pandas as pd
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from pycanon import anonymity

from streamdetect.checks.table.anonymity import TableAnonymity
from streamdetect.model.batch import Batch
from streamdetect.model.topology import CheckConfig, TableSchema, Topology, ViewDefinition

QI = ("Zip", "Age")
SENSITIVE = ("Illness", "Salary")
ATTRIBUTES = ("Name", *QI, *SENSITIVE)


def _topology(k: int) -> Topology:
    table = TableSchema(
        name="T",
        attributes=ATTRIBUTES,
        identifiers=("Name",),
        sensitive=SENSITIVE,
        quasi_identifiers=QI,
        source="t.csv",
    )
    views = (
        ViewDefinition("v1", ("Zip", "Illness"), source="v1.csv"),  # one quasi-identifier, one sensitive
        ViewDefinition("v2", ("Name", "Zip", "Age"), source="v2.csv"),  # no sensitive: k-anonymity only
        ViewDefinition("v3", ("Name", "Salary"), source="v3.csv"),  # no quasi-identifier: not examined
    )
    return Topology("t", table, views, (CheckConfig("table-k-anonymity", k), CheckConfig("l-diversity", k)))


def _reference(
    criterion: str, k: int, relations: dict[str | None, list[dict[str, Any]]], topology: Topology
) -> set[str]:
    """The findings' JSON, from the definitions: per relation, group its rows by the quasi-identifiers it
    has; a group of fewer than k rows (k-anonymity), or with fewer than k distinct values of a sensitive
    attribute it has (l-diversity), is a finding."""
    check = TableAnonymity(topology, criterion, k)  # only to name findings the same way
    found = set()
    for name, rows in relations.items():
        if name not in check.relations or not rows:
            continue
        relation = check.relations[name]
        groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            groups[tuple(row[a] for a in relation.keys)].append(row)
        for key, members in groups.items():
            group = dict(zip(relation.keys, key, strict=True))
            if criterion == "table-k-anonymity" and len(members) < k:
                found.add(repr(("table-k-anonymity", name, group, len(members), k)))
            for attribute in relation.sensitive:
                distinct = len({m[attribute] for m in members})
                if distinct < k:
                    found.add(repr(("l-diversity", name, group, len(members), attribute, distinct, k)))
    return found


def _seen(findings: Any) -> set[str]:
    out = set()
    for f in findings:
        d = f.to_dict()
        if d["check"] == "table-k-anonymity":
            out.add(repr((d["check"], d["view"], d["group"], d["count"], d["k"])))
        else:
            out.add(repr((d["check"], d["view"], d["group"], d["count"], d["sensitive"], d["distinct"], d["l"])))
    return out


values = st.sampled_from(["a", "b", "c", None])
rows_strategy = st.lists(
    st.fixed_dictionaries(
        {
            "Name": st.sampled_from(["Ann", "Bob", "Cy", "Dan"]),
            "Zip": values,
            "Age": st.sampled_from([30, 40, None]),
            "Illness": values,
            "Salary": st.sampled_from([1, 2, 3]),
        }
    ),
    min_size=1,
    max_size=30,
)


def _frame(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> pl.DataFrame:
    schema = {"Name": pl.String, "Zip": pl.String, "Age": pl.Int64, "Illness": pl.String, "Salary": pl.Int64}
    return pl.DataFrame([{c: r[c] for c in columns} for r in rows], schema={c: schema[c] for c in columns})


@settings(max_examples=150, deadline=None)
@given(rows_strategy, st.integers(2, 4), st.integers(1, 4), st.randoms(use_true_random=False))
def test_incremental_findings_match_the_definitions(
    rows: list[dict[str, Any]], k: int, batches: int, rng: random.Random
) -> None:
    topology = _topology(k)
    for criterion in ("table-k-anonymity", "l-diversity"):
        check = TableAnonymity(topology, criterion, k)
        state = check.initialize()
        replica = check.initialize()
        present: list[dict[str, Any]] = []
        opened: dict[str, Any] = {}
        chunks = [rows[i::batches] for i in range(batches)]
        for chunk in chunks:
            withdrawn = rng.sample(present, rng.randint(0, len(present))) if present else []
            for row in withdrawn:
                present.remove(row)
            present += chunk
            batch = Batch(
                table=_frame(chunk, ATTRIBUTES),
                views={v.name: _frame(chunk, v.attributes) for v in topology.views},
                retracted_table=_frame(withdrawn, ATTRIBUTES) if withdrawn else None,
                retracted={v.name: _frame(withdrawn, v.attributes) for v in topology.views} if withdrawn else {},
            )
            assert check.validate(state, batch) is None
            delta = check.update(state, batch)
            for f in delta.cleared:
                assert opened.pop(f.id, None) is not None
            for f in delta.raised:
                opened[f.id] = f
            check.apply_changes(replica, check.changes(state))
            relations: dict[str | None, list[dict[str, Any]]] = {None: present}
            relations |= {v.name: present for v in topology.views}
            expected = _reference(criterion, k, relations, topology)
            assert _seen(check.result(state)) == expected
            assert _seen(opened.values()) == expected  # raised minus cleared is the open set
            assert _seen(check.result(replica)) == expected  # rebuilt from the written pieces
            assert _seen(check.result(check.decode(bytes(check.encode(state))))) == expected


def test_withdrawing_a_row_that_is_not_there_is_refused() -> None:
    topology = _topology(2)
    check = TableAnonymity(topology, "table-k-anonymity", 2)
    state = check.initialize()
    rows = [{"Name": "Ann", "Zip": "a", "Age": 30, "Illness": "x", "Salary": 1}]
    check.update(state, Batch(table=_frame(rows, ATTRIBUTES)))
    other = [{"Name": "Bob", "Zip": "b", "Age": 30, "Illness": "x", "Salary": 1}]
    problem = check.validate(state, Batch(retracted_table=_frame(other, ATTRIBUTES)))
    assert problem is not None
    assert "withdraws" in problem


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("abc"), st.sampled_from([1, 2]), st.sampled_from("xyz")), min_size=1, max_size=40
    )
)
def test_pycanon_measures_the_same_k_and_l(rows: list[tuple[str, int, str]]) -> None:
    """pycanon's k is the smallest group: with k above every group, the smallest count among the
    findings. Its l (distinct l-diversity) is the smallest number of distinct sensitive values."""
    frame = pl.DataFrame(rows, schema={"Zip": pl.String, "Age": pl.Int64, "Illness": pl.String}, orient="row")
    data = pd.DataFrame(rows, columns=["Zip", "Age", "Illness"])
    table = TableSchema("T", ("Zip", "Age", "Illness"), (), ("Illness",), ("Zip", "Age"), source="t.csv")
    topology = Topology("t", table, (ViewDefinition("v", ("Zip",), source="v.csv"),))
    above = len(rows) + 1
    k = TableAnonymity(topology, "table-k-anonymity", above)
    groups = k.update(k.initialize(), Batch(table=frame)).raised
    assert min(f.count for f in groups if f.relation is None) == anonymity.k_anonymity(data, ["Zip", "Age"])
    l_check = TableAnonymity(topology, "l-diversity", above)
    diverse = l_check.update(l_check.initialize(), Batch(table=frame)).raised
    assert min(f.distinct or 0 for f in diverse) == anonymity.l_diversity(data, ["Zip", "Age"], ["Illness"])


@settings(max_examples=100, deadline=None)
@given(rows_strategy, st.integers(2, 4))
def test_a_first_load_raises_the_findings_in_report_order(rows: list[dict[str, Any]], k: int) -> None:
    """The lazy findings of a first load come out in the order result() gives (run_checks relies on it)."""
    topology = _topology(k)
    for criterion in ("table-k-anonymity", "l-diversity"):
        check = TableAnonymity(topology, criterion, k)
        state = check.initialize()
        views = {v.name: _frame(rows, v.attributes) for v in topology.views}
        batch = Batch(table=_frame(rows, ATTRIBUTES), views=views)
        raised = check.update(state, batch).raised
        assert [f.id for f in raised] == [f.id for f in check.result(state)]
        assert [raised[i].id for i in range(len(raised))] == [f.id for f in raised]  # indexing agrees
