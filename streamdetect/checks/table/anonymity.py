"""Classic one-table criteria over the base table and each view: k-anonymity and distinct l-diversity.

A relation (the private table, or a view holding quasi-identifiers) is k-anonymous when every group of
rows with equal quasi-identifier values has at least k rows (Samarati 2001; the criterion pycanon's
``k_anonymity`` measures), and distinct l-diverse when every group holds at least l distinct values of
each sensitive attribute it carries (Machanavajjhala et al. 2006; pycanon's ``l_diversity``). A view's
quasi-identifiers are the table's that it projects; a view with none is not examined (all its rows
look alike), nor, for l-diversity, one without a sensitive attribute. Null is a value like any other.

Incremental and exact: the state counts rows per group (and, for l-diversity, per group and sensitive
value, with the number of distinct values per group); a batch adds and withdraws counts for the groups it
touches, and only those groups' findings are compared before and after. A first batch into an empty
state is grouped by polars in one pass (the batch ``check``), later ones in time proportional to their
groups. Pieces written (:meth:`TableAnonymity.changes`) are the count deltas of each batch.

The checks' names: ``table-k-anonymity`` (threshold ``k``) and ``l-diversity`` (threshold ``l``).
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, overload

import polars as pl

from streamdetect.checks.canonical import value_text
from streamdetect.checks.findings import Delta, GroupFinding, diff
from streamdetect.checks.presentation import Section, Shown
from streamdetect.checks.protocol import CheckProperties, CheckSummary, ProgressFactory
from streamdetect.model.batch import Batch
from streamdetect.model.codecs import Encoded, document_parts, frame_from_ipc, frame_to_ipc, versioned_document
from streamdetect.model.topology import Topology

Criterion = Literal["table-k-anonymity", "l-diversity"]
Key = tuple[Any, ...]
#: The count column of delta frames (a name no attribute can take: attributes are the table's).
_COUNT = "__streamdetect_count"
#: How the base table is named among the relations (a view's name is its own).
TABLE: str | None = None


@dataclass(frozen=True)
class Relation:
    """One relation examined: its name (None for the base table), quasi-identifiers and sensitive
    attributes (those it carries)."""

    name: str | None
    keys: tuple[str, ...]
    sensitive: tuple[str, ...]


@dataclass
class GroupCounts:
    """Rows per group of one relation, and per (group, sensitive value) with distinct values per group.

    A first load leaves its grouped frames here (``deferred``) and the dictionaries are built from them
    when an update or the result first reads them: a batch ``check`` never pays for them."""

    _rows: dict[Key, int] = field(default_factory=dict)
    _pairs: dict[str, dict[Key, int]] = field(default_factory=dict)
    _distinct: dict[str, dict[Key, int]] = field(default_factory=dict)
    schema: dict[str, pl.DataType] = field(default_factory=dict)
    #: (which dictionary, attribute or None, grouped frame, its key columns, its count column).
    deferred: list[tuple[str, str | None, pl.DataFrame, list[str], str]] = field(default_factory=list)

    def _build(self) -> None:
        for which, attribute, source, columns, column in self.deferred:
            # Raw rows (no count column): count them per (group, value) now.
            frame = source if column else source.group_by(columns).agg(pl.len().alias(_COUNT))
            count = column or _COUNT
            built = dict(zip(_tuples(frame, columns), frame.get_column(count).to_list(), strict=True))
            if which == "rows":
                self._rows = built
            else:
                (self._pairs if which == "pairs" else self._distinct)[attribute or ""] = built
        self.deferred.clear()

    @property
    def empty(self) -> bool:
        """Nothing counted."""
        return not self.deferred and not self._rows

    @property
    def rows(self) -> dict[Key, int]:
        """Rows per group."""
        self._build()
        return self._rows

    @property
    def pairs(self) -> dict[str, dict[Key, int]]:
        """Per sensitive attribute, rows per (group values..., sensitive value)."""
        self._build()
        return self._pairs

    @property
    def distinct(self) -> dict[str, dict[Key, int]]:
        """Per sensitive attribute, distinct sensitive values per group."""
        self._build()
        return self._distinct


@dataclass
class AnonymityState:
    """Group counts per relation (by name; the base table under ``""``), and the deltas not written yet."""

    VERSION = 1
    relations: dict[str, GroupCounts] = field(default_factory=dict)
    #: Count deltas not written yet: (relation label, delta), or (label, rows) for a first load, whose
    #: delta is grouped only if :meth:`TableAnonymity.changes` is called (a batch ``check`` never does).
    pending: list[tuple[str, pl.DataFrame, bool]] = field(default_factory=list, compare=False)
    written: int = 0


def _label(name: str | None) -> str:
    return "" if name is None else name


class TableAnonymity:
    """``table-k-anonymity`` or ``l-diversity`` over the base table (when its rows are given) and every
    view holding quasi-identifiers."""

    def __init__(self, topology: Topology, criterion: Criterion, k: int | None = None) -> None:
        self.topology = topology
        self.criterion = criterion
        self._k = topology.threshold(criterion, k)
        table = topology.table
        self.relations: dict[str | None, Relation] = {}
        if table.source is not None:
            self.relations[TABLE] = Relation(None, table.quasi_identifiers, table.sensitive)
        for view in topology.views:
            keys = tuple(q for q in table.quasi_identifiers if q in view.attributes)
            sensitive = tuple(s for s in table.sensitive if s in view.attributes)
            if keys and (criterion == "table-k-anonymity" or sensitive):
                self.relations[view.name] = Relation(view.name, keys, sensitive)
        if criterion == "table-k-anonymity":  # k-anonymity counts rows only
            self.relations = {n: Relation(r.name, r.keys, ()) for n, r in self.relations.items()}

    @classmethod
    def k_anonymity(cls, topology: Topology, k: int | None = None, max_level: int | None = None) -> TableAnonymity:
        """``table-k-anonymity`` as the topology configures it (``max_level`` does not apply)."""
        del max_level
        return cls(topology, "table-k-anonymity", k)

    @classmethod
    def l_diversity(cls, topology: Topology, k: int | None = None, max_level: int | None = None) -> TableAnonymity:
        """``l-diversity`` as the topology configures it (``k`` is its l; ``max_level`` does not apply)."""
        del max_level
        return cls(topology, "l-diversity", k)

    @property
    def name(self) -> str:
        """The registered name."""
        return self.criterion

    @property
    def k(self) -> int:
        """The threshold: k, or l for l-diversity."""
        return self._k

    @property
    def properties(self) -> CheckProperties:
        """Takes withdrawals; reads the table's rows when the topology has them."""
        source = self.topology.table.source is not None
        return CheckProperties(
            needs_table=source,
            retractions=True,
            table_reason="its groups are checked as well as the views'" if source else "",
        )

    def initialize(self) -> AnonymityState:
        """No rows counted."""
        return AnonymityState()

    def _frames(self, batch: Batch) -> Iterable[tuple[Relation, pl.DataFrame | None, pl.DataFrame | None]]:
        """Per relation the batch touches: (relation, rows added, rows withdrawn)."""
        for name, relation in self.relations.items():
            added = batch.table if name is None else batch.views.get(name)
            withdrawn = batch.retracted_table if name is None else batch.retracted.get(name)
            if (added is not None and added.height) or (withdrawn is not None and withdrawn.height):
                yield relation, added, withdrawn

    def _delta(self, relation: Relation, added: pl.DataFrame | None, withdrawn: pl.DataFrame | None) -> pl.DataFrame:
        """Count changes per group (and sensitive value): one frame, keys, the sensitive columns (null
        where a row counts the group itself), and the signed count. Polars group-by: O(batch)."""
        keys = list(relation.keys)
        parts = []
        for frame, sign in ((added, 1), (withdrawn, -1)):
            if frame is None or not frame.height:
                continue
            parts.append(frame.group_by(keys).agg(pl.len().cast(pl.Int64).mul(sign).alias(_COUNT)))
            for attribute in relation.sensitive:
                pairs = frame.group_by([*keys, attribute]).agg(pl.len().cast(pl.Int64).mul(sign).alias(_COUNT))
                parts.append(
                    pairs.rename({attribute: f"{_COUNT}:{attribute}"}).with_columns(
                        pl.lit(attribute).alias(_COUNT + ":s")
                    )
                )
        return pl.concat(parts, how="diagonal_relaxed")

    def validate(self, state: AnonymityState, batch: Batch) -> str | None:
        """A withdrawn row whose group (or group and sensitive value) does not hold it."""
        for relation, _, withdrawn in self._frames(batch):
            if withdrawn is None or not withdrawn.height:
                continue
            counts = state.relations.get(_label(relation.name), GroupCounts())
            keys = list(relation.keys)
            taken = withdrawn.group_by(keys).len()
            for *key, n in taken.iter_rows():
                if counts.rows.get(tuple(key), 0) < n:
                    where = "the table" if relation.name is None else f"view {relation.name}"
                    return f"batch withdraws {n} row(s) of a group of {where} that has fewer published"
        return None

    def update(
        self, state: AnonymityState, batch: Batch, progress: ProgressFactory | None = None
    ) -> Delta[GroupFinding]:
        """Add and withdraw the batch's rows; the findings of the groups it touched, before and after.
        O(rows of the batch + groups touched), plus the findings raised and cleared."""
        del progress
        raised: list[Sequence[GroupFinding]] = []
        cleared: list[GroupFinding] = []
        for relation, added, withdrawn in self._frames(batch):
            label = _label(relation.name)
            counts = state.relations.setdefault(label, GroupCounts())
            frame = added if added is not None else withdrawn
            assert frame is not None
            if not counts.schema:
                counts.schema = {name: frame.schema[name] for name in relation.keys + relation.sensitive}
            if counts.empty and (withdrawn is None or not withdrawn.height) and added is not None:
                state.pending.append((label, added, False))
                raised.append(self._load(relation, counts, added))
                continue
            delta = self._delta(relation, added, withdrawn)
            state.pending.append((label, delta, True))
            changed = self._fold(relation, counts, delta)
            raised.append(changed.raised)
            cleared += changed.cleared
        if len(raised) == 1 and isinstance(raised[0], GroupFindings):
            return Delta(raised[0], tuple(cleared))  # a first load: built when read
        return Delta(tuple(f for part in raised for f in part), tuple(cleared))

    def _load(self, relation: Relation, counts: GroupCounts, rows: pl.DataFrame) -> GroupFindings:
        """An empty relation's first rows, grouped in one polars pass (rows and, for l-diversity, distinct
        sensitive values per group): its findings in report order (count, then group values). The
        dictionaries for later batches (rows per group, per group and value) are built only if one comes."""
        keys = list(relation.keys)
        distinct = [pl.col(a).n_unique().alias(f"{_COUNT}:d:{a}") for a in relation.sensitive]
        grouped = rows.group_by(keys).agg(pl.len().alias(_COUNT), *distinct)
        counts.deferred.append(("rows", None, grouped, keys, _COUNT))
        context = (self.criterion, self.k, relation.name, relation.keys)
        if self.criterion == "table-k-anonymity":
            small = grouped.filter(pl.col(_COUNT) < self.k)
            return GroupFindings([(context, small, None)])
        parts: list[Part] = []
        for attribute in relation.sensitive:
            # Grouped by (group, value) only when built: the rows themselves wait here.
            counts.deferred.append(("pairs", attribute, rows, [*keys, attribute], ""))
            counts.deferred.append(("distinct", attribute, grouped, keys, f"{_COUNT}:d:{attribute}"))
            column = pl.col(f"{_COUNT}:d:{attribute}")
            poor = grouped.filter(column < self.k).select(*keys, _COUNT, column.alias("distinct"))
            parts.append((context, poor, attribute))
        return GroupFindings(parts)

    def _fold(self, relation: Relation, counts: GroupCounts, delta: pl.DataFrame) -> Delta[GroupFinding]:
        """Apply a delta frame; the findings of the groups it touched that it raised and cleared."""
        touched = set(_tuples(delta.unique(list(relation.keys)), list(relation.keys)))
        before = self._findings_of(relation, counts, touched)
        self._apply(relation, counts, delta)
        return diff(before, self._findings_of(relation, counts, touched))

    def _apply(self, relation: Relation, counts: GroupCounts, delta: pl.DataFrame) -> None:
        """Fold a delta frame into the counts (a group or pair at zero is dropped). O(rows of the delta)."""
        keys = list(relation.keys)
        which = delta.get_column(_COUNT + ":s").to_list() if _COUNT + ":s" in delta.columns else [None] * delta.height
        values = {a: delta.get_column(f"{_COUNT}:{a}").to_list() for a in relation.sensitive}
        for position, (key, n) in enumerate(zip(_tuples(delta, keys), delta.get_column(_COUNT).to_list(), strict=True)):
            attribute = which[position]
            if attribute is None:
                total = counts.rows.get(key, 0) + n
                if total:
                    counts.rows[key] = total
                else:
                    counts.rows.pop(key, None)
                continue
            pair = (*key, values[attribute][position])
            pairs = counts.pairs.setdefault(attribute, {})
            distinct = counts.distinct.setdefault(attribute, {})
            was = pairs.get(pair, 0)
            now = was + n
            if now:
                pairs[pair] = now
            else:
                pairs.pop(pair, None)
            change = (now > 0) - (was > 0)
            if change:
                left = distinct.get(key, 0) + change
                if left:
                    distinct[key] = left
                else:
                    distinct.pop(key, None)

    def _findings_of(self, relation: Relation, counts: GroupCounts, keys: Iterable[Key]) -> list[GroupFinding]:
        """The findings of the given groups, as the counts stand."""
        names = relation.keys
        findings = []
        for key in keys:
            n = counts.rows.get(key, 0)
            if not n:
                continue
            if self.criterion == "table-k-anonymity":
                if n < self.k:
                    findings.append(GroupFinding(self.criterion, self.k, relation.name, names, key, n))
                continue
            for attribute in relation.sensitive:
                d = counts.distinct.get(attribute, {}).get(key, 0)
                if d < self.k:
                    findings.append(GroupFinding(self.criterion, self.k, relation.name, names, key, n, attribute, d))
        return findings

    def merge(self, state: AnonymityState, other: AnonymityState) -> Delta[GroupFinding]:
        """Fold another partition's counts in (sums: groups are bags)."""
        raised: list[GroupFinding] = []
        cleared: list[GroupFinding] = []
        for relation in self.relations.values():
            theirs = other.relations.get(_label(relation.name))
            if theirs is None or theirs.empty:
                continue
            counts = state.relations.setdefault(_label(relation.name), GroupCounts(schema=dict(theirs.schema)))
            delta = _counts_frame(relation, theirs)
            state.pending.append((_label(relation.name), delta, True))
            changed = self._fold(relation, counts, delta)
            raised += changed.raised
            cleared += changed.cleared
        return Delta(tuple(raised), tuple(cleared))

    def result(self, state: AnonymityState) -> list[GroupFinding]:
        """Every finding, relation by relation (the table first, then views in topology order), each by
        count (or distinct values), then group values. O(groups)."""
        findings = []
        for relation in self.relations.values():
            counts = state.relations.get(_label(relation.name))
            if counts is None:
                continue
            found = self._findings_of(relation, counts, counts.rows)
            position = {attribute: i for i, attribute in enumerate(relation.sensitive)}
            findings += sorted(
                found,
                key=lambda f: (position.get(f.sensitive_attribute or "", 0), f.distinct or 0, f.count, _order(f.group)),
            )
        return findings

    def encode(self, state: AnonymityState) -> Encoded:
        """The counts, one frame per relation (a versioned document)."""
        document = {
            "version": AnonymityState.VERSION,
            "relations": {
                label: _counts_frame(self.relations[label or None], counts)
                for label, counts in state.relations.items()
                if not counts.empty
            },
            "written": state.written,
        }
        return document_parts(document)

    def decode(self, data: bytes | memoryview) -> AnonymityState:
        """Inverse of :meth:`encode`; refuses another version."""
        document = versioned_document(data, AnonymityState.VERSION, self.criterion)
        state = AnonymityState(written=document["written"])
        for label, written in document["relations"].items():
            relation = self.relations[label or None]
            # A frame, or hex Arrow IPC in a document written before binary documents.
            frame = written if isinstance(written, pl.DataFrame) else frame_from_ipc(bytes.fromhex(written))
            counts = state.relations.setdefault(label, GroupCounts())
            counts.schema = _schema(relation, frame)
            self._apply(relation, counts, frame)
        return state

    def changes(self, state: AnonymityState) -> dict[str, bytes]:
        """The count deltas of the batches since the last call, numbered (append-only)."""
        pieces = {}
        for label, frame, grouped in state.pending:
            relation = self.relations[label or None]
            delta = frame if grouped else self._delta(relation, frame, None)
            pieces[f"{state.written:012d}"] = json.dumps({"relation": label}).encode() + b"\n" + frame_to_ipc(delta)
            state.written += 1
        state.pending.clear()
        return pieces

    def apply_changes(self, state: AnonymityState, pieces: Mapping[str, bytes]) -> AnonymityState:
        """Fold written deltas in, in key order."""
        for key in sorted(pieces):
            header, _, body = pieces[key].partition(b"\n")
            label = json.loads(header)["relation"]
            relation = self.relations[label or None]
            frame = frame_from_ipc(body)
            counts = state.relations.setdefault(label, GroupCounts())
            if not counts.schema:
                counts.schema = _schema(relation, frame)
            self._apply(relation, counts, frame)
            state.written = max(state.written, int(key) + 1)
        return state

    def summary(self, findings: int) -> CheckSummary:
        """Relations examined, and (relation, sensitive attribute) pairs for l-diversity."""
        tasks = sum(max(1, len(r.sensitive)) for r in self.relations.values())
        return CheckSummary(self.criterion, self.k, len(self.relations), tasks, findings)


#: One relation's (or one sensitive attribute's) violating groups: (check, threshold, relation,
#: quasi-identifiers), the groups (keys, count, and ``distinct`` for l-diversity), the sensitive attribute.
Part = tuple[tuple[str, int, str | None, tuple[str, ...]], pl.DataFrame, str | None]


class GroupFindings(Sequence[GroupFinding]):
    """Findings held as polars frames of violating groups, built as :class:`GroupFinding` objects when
    read: a first load can find one group per row (45,222 on BP), and the check's answer (which groups,
    how many) is complete before any object is made. Iterating builds them all, in order. O(1) length."""

    def __init__(self, parts: list[Part]) -> None:
        self._parts = parts
        self._sorted: list[Part] | None = None
        self.sizes = [frame.height for _, frame, _ in parts]

    @property
    def parts(self) -> list[Part]:
        """The parts with their groups in report order (by distinct values, count, then group values),
        sorted on first read: the answer is counted before it is ordered."""
        if self._sorted is None:
            self._sorted = [
                (
                    context,
                    frame.sort([*(["distinct"] if attribute else []), _COUNT, *context[3]], nulls_last=True),
                    attribute,
                )
                for context, frame, attribute in self._parts
            ]
        return self._sorted

    def __len__(self) -> int:
        return sum(self.sizes)

    def __iter__(self) -> Iterator[GroupFinding]:
        for (kind, k, name, names), frame, attribute in self.parts:
            keys = _tuples(frame, list(names))
            counted = frame.get_column(_COUNT).to_list()
            if attribute is None:
                for key, n in zip(keys, counted, strict=True):
                    yield GroupFinding(kind, k, name, names, key, n)
            else:
                distinct = frame.get_column("distinct").to_list()
                for key, n, d in zip(keys, counted, distinct, strict=True):
                    yield GroupFinding(kind, k, name, names, key, n, attribute, d)

    @overload
    def __getitem__(self, index: int) -> GroupFinding: ...

    @overload
    def __getitem__(self, index: slice) -> list[GroupFinding]: ...

    def __getitem__(self, index: int | slice) -> GroupFinding | list[GroupFinding]:
        if isinstance(index, slice):
            return list(itertools.islice(iter(self), *index.indices(len(self))))
        position = index + len(self) if index < 0 else index
        for ((kind, k, name, names), frame, attribute), size in zip(self.parts, self.sizes, strict=True):
            if position < size:
                row = frame.row(position, named=True)
                key = tuple(row[a] for a in names)
                if attribute is None:
                    return GroupFinding(kind, k, name, names, key, row[_COUNT])
                return GroupFinding(kind, k, name, names, key, row[_COUNT], attribute, row["distinct"])
            position -= size
        raise IndexError(index)


def _schema(relation: Relation, delta: pl.DataFrame) -> dict[str, pl.DataType]:
    """The relation's attribute types as a delta frame holds them (a sensitive attribute under its
    delta column; one a first load's pieces lack is left out)."""
    columns = {
        name: f"{_COUNT}:{name}" if name in relation.sensitive else name for name in relation.keys + relation.sensitive
    }
    return {name: delta.schema[column] for name, column in columns.items() if column in delta.columns}


def _tuples(frame: pl.DataFrame, columns: list[str]) -> Iterable[Key]:
    """The rows of ``columns`` as tuples (C-speed: zip over Python lists)."""
    return zip(*(frame.get_column(c).to_list() for c in columns), strict=True)


def _order(group: tuple[tuple[str, Any], ...]) -> tuple[tuple[bool, Any], ...]:
    """A sort key for group values, nulls last (a column holds one type: values compare as polars sorts
    them, so the order is the first load's)."""
    return tuple((True, 0) if value is None else (False, value) for _, value in group)


def _counts_frame(relation: Relation, counts: GroupCounts) -> pl.DataFrame:
    """The counts as a delta frame from nothing (what :meth:`TableAnonymity._apply` folds in)."""
    keys = list(relation.keys)
    schema = {name: counts.schema.get(name, pl.String()) for name in keys}
    parts = [
        pl.DataFrame(
            [list(column) for column in zip(*counts.rows, strict=True)] or [[] for _ in keys],
            schema=schema,
            orient="col",
        ).with_columns(pl.Series(_COUNT, list(counts.rows.values()), dtype=pl.Int64))
    ]
    for attribute, pairs in counts.pairs.items():
        columns = [list(column) for column in zip(*pairs, strict=True)] or [[] for _ in [*keys, attribute]]
        pair_schema = {**schema, f"{_COUNT}:{attribute}": counts.schema.get(attribute, pl.String())}
        frame = pl.DataFrame(columns, schema=pair_schema, orient="col")
        parts.append(
            frame.with_columns(
                pl.Series(_COUNT, list(pairs.values()), dtype=pl.Int64), pl.lit(attribute).alias(_COUNT + ":s")
            )
        )
    return pl.concat(parts, how="diagonal_relaxed")


def section(summary: CheckSummary, findings: Sequence[GroupFinding], shown: Shown) -> Section:
    """The check's section of a report: one block per relation (the table, then each view) and sensitive
    attribute."""
    diverse = summary.name == "l-diversity"
    heading = (
        f"{summary.name} ({'l' if diverse else 'k'} = {summary.k}): groups of equal quasi-identifier values "
        f"{'with fewer distinct sensitive values than l' if diverse else 'smaller than k'}, "
        f"{summary.channels} relation(s) examined"
    )
    groups: dict[tuple[str | None, str | None], list[GroupFinding]] = defaultdict(list)
    for finding in findings:
        groups[(finding.relation, finding.sensitive_attribute)].append(finding)
    blocks = []
    for (relation, sensitive), members in groups.items():
        where = "the table" if relation is None else f"view {relation}"
        distinct = sensitive is not None
        columns = ("#", "id", "group", "rows", *((f"distinct {sensitive}",) if distinct else ()))
        rows = [
            (
                shown.number(f),
                shown.marked_id(f),
                ", ".join(f"{name}={value_text(value)}" for name, value in f.group),
                str(f.count),
                *((str(f.distinct),) if distinct else ()),
            )
            for f in members
        ]
        what = (
            f"groups with fewer than {members[0].k} distinct {sensitive}"
            if distinct
            else f"groups of fewer than {members[0].k} rows"
        )
        blocks.append(shown.block(f"{where}: {what}: {len(members)} finding(s)", columns, rows))
    return Section(heading, tuple(blocks))
