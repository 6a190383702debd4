"""k-SIND: symmetric indistinguishability of the public tuples (Yao, Wang, Wang & Jajodia).

Publisher-side: it needs the private table. The public attributes B are the table's attributes minus
the sensitive ones, assumed a key; for each sensitive attribute P, two B tuples are SIND when they can
swap their P values in every instance without changing any view (Definition 1); SIND is an
equivalence and its classes partition the B tuples; k-SIND holds when every class has k members
(Definition 2).

Exact subcase (Proposition 5): no view's selection mentions P. Then b1 and b2 are SIND iff for every
view q = Π_X σ_C projecting P, Π_{X-{P}} σ_C(b1) = Π_{X-{P}} σ_C(b2), given at least two possible
private values: the class of b is its *signature*, the tuple over views of "not selected" or its
projected values. Views not projecting P reveal nothing about P here and are left out. This is the
partition of Figure 4, in O(|views| · |table|) with hash grouping.

Otherwise (a selection mentions P) the conservative per-view method of section 3.1: b's signature for
q is the set of P values (among those in the table) that make C true once b is substituted, with its
projected values when that set is not empty; equal signatures for every view imply SIND, so classes
can only be split too finely: a violation is never missed (``exact`` false).

Other sensitive attributes are not swapped along with P: in a view they act like public values of b.

Findings: a class smaller than k, or a class of k or more whose members can take only one private
value (indistinguishable but certain). The latter is decided over all views together, as an
instance-existence question (Theorem 1: NP-hard), by SAT (:mod:`.private_values`):
only classes whose members all hold one current value are asked (members of a SIND class can swap, so
two current values in a class already give each member two possible values), one SAT call per class on
the component of its first member. A tuple that no view constrains can take a value no view shows, so it
is never certain. Beyond the SAT budget the finding is ``exact: false`` and says so.

Incremental over batches of new table rows: a row's signature depends on that row alone (exact case),
so an update adds rows to classes; the conservative case recomputes signatures when a new P value widens
the domain; certainty is recomputed per update (it depends on every view's counts).
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from operator import itemgetter
from typing import Any

import numpy as np
import polars as pl

from streamdetect.checks.batch_log import BatchLog
from streamdetect.checks.canonical import member_text
from streamdetect.checks.findings import Delta, SindFinding, diff
from streamdetect.checks.indistinguishability.kept_classes import Holding, KeptClasses
from streamdetect.checks.indistinguishability.private_values import (
    MAX_COMPONENT,
    MAX_PAIRS,
    CertaintyOracle,
    build_oracle,
)
from streamdetect.errors import TopologyError
from streamdetect.model.codecs import Encoded, as_frame, document_parts, versioned_document
from streamdetect.model.predicates import literals_of, to_polars
from streamdetect.model.topology import Topology, ViewDefinition
from streamdetect.relational import code_arrays
from streamdetect.relational.bags import remove_occurrences

SIGNATURE = "\0signature"
#: Why the members of a merged class are a finding (the class of the tuples certain of one value).
CERTAIN = "every member can take only one private value (decided over all views by SAT)"
NOT_SELECTED = "\0not selected"


def publisher_settings(topology: Topology, name: str, k: int | None) -> tuple[tuple[str, ...], int]:
    """The public attributes B and the threshold of a publisher-side check; it needs ``table.source``."""
    if topology.table.source is None:
        raise TopologyError(
            f"the {name} check needs the private table: set table.source", file=topology.path, key="table.source"
        )
    public = tuple(a for a in topology.table.attributes if a not in topology.table.sensitive)
    return public, topology.threshold(name, k)


@dataclass(frozen=True)
class SindClass:
    """One SIND class: its public tuples, the private values its members may take, how it was found."""

    members: tuple[tuple[tuple[str, Any], ...], ...]
    #: positions of the members in the state's rows, in the order of ``members``
    rows: tuple[int, ...]
    views: tuple[str, ...]
    exact: bool


@dataclass
class RowCache:
    """Per row of a state's ``rows``, in order: the member it is in a finding (its public values as
    (attribute, value) pairs), that member's canonical JSON text and its report order key. Built once per
    row (arrivals extend it; a withdrawal rebuilds it), so a class of thousands of members costs a join of
    texts per update, not a document."""

    members: list[tuple[tuple[str, Any], ...]] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    keys: list[tuple[str, ...]] = field(default_factory=list)
    #: The rows in the order of their keys (``in_order``), and their keys so ordered (an object array of
    #: tuples, for binary search): arrivals are merged in, not the whole sorted again.
    order: np.ndarray[Any, Any] = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    ordered_keys: np.ndarray[Any, Any] = field(default_factory=lambda: np.empty(0, dtype=object))
    #: Per sensitive attribute of the exact subcase, each row's SIND signature as one text key (it depends
    #: on the row alone there: computed once per row).
    signatures: dict[str, pl.Series] = field(default_factory=dict)
    #: Per sensitive attribute of the exact subcase, its classes kept under arrivals (:mod:`.kept_classes`).
    classes: dict[str, KeptClasses] = field(default_factory=dict)

    def extend(self, public: Sequence[str], rows: pl.DataFrame) -> None:
        """Add ``rows``' entries (their public attributes), after those of the rows before them."""
        for values in rows.select(public).iter_rows():
            member = tuple(zip(public, values, strict=True))
            self.members.append(member)
            self.texts.append(member_text(member))
            self.keys.append(tuple(str(value) for value in values))

    def in_order(self) -> np.ndarray[Any, Any]:
        """Every row's position, in the order of their keys (Python's order of the key tuples: the order
        of the report). The rows since the last call are sorted and merged in by binary search."""
        done = self.order.size
        if done < len(self.keys):
            keys = self.keys
            fresh = sorted(range(done, len(keys)), key=keys.__getitem__)
            fresh_keys = np.fromiter((keys[row] for row in fresh), dtype=object, count=len(fresh))
            at = np.searchsorted(self.ordered_keys, fresh_keys, side="right")
            self.ordered_keys = np.insert(self.ordered_keys, at, fresh_keys)
            self.order = np.insert(self.order, at, np.array(fresh, dtype=np.int64))
        return self.order


@dataclass
class SindState:
    """The table rows seen so far (B attributes and the sensitive ones)."""

    VERSION = 2
    rows: pl.DataFrame | None = None
    #: The batches taken since the last write (:mod:`streamdetect.checks.batch_log`).
    log: BatchLog = field(default_factory=BatchLog, compare=False)
    #: The findings of the last update: a cache (not serialized), so an update recomputes once.
    findings: list[Any] | None = field(default=None, compare=False)
    #: Per row, its member, text and order key (:class:`RowCache`; not serialized, rebuilt when None).
    cache: RowCache | None = field(default=None, compare=False, repr=False)
    #: Per sensitive attribute, the RSIND check's nodes and partition over ``rows`` (not serialized, rebuilt
    #: when absent; :mod:`streamdetect.checks.indistinguishability.rsind`).
    partitions: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    #: The hashes of the public values of ``rows`` (the frame they were made for), sorted (not serialized;
    #: made again when ``rows`` is another frame than theirs): a batch's rows are looked up among them, not
    #: joined with every row, to see that the public attributes stay a key.
    key_hashes: tuple[weakref.ref[pl.DataFrame], np.ndarray[Any, Any]] | None = field(
        default=None, compare=False, repr=False
    )

    def to_parts(self) -> Encoded:
        """Serialize (a versioned document with an Arrow IPC frame), as the parts of its bytes."""
        return document_parts({"version": self.VERSION, "rows": self.rows, "written": self.log.written})

    def to_bytes(self) -> bytes:
        """:meth:`to_parts` joined."""
        return self.to_parts().joined()

    @classmethod
    def from_bytes(cls, data: bytes | memoryview) -> SindState:
        """Inverse of :meth:`to_bytes`; refuses a state of another version."""
        document = versioned_document(data, cls.VERSION, "table rows")
        rows = as_frame(document["rows"]) if document["rows"] is not None else None
        return cls(rows=rows, log=BatchLog(written=document["written"]))

    def without(self, withdrawn: pl.DataFrame | None, columns: Sequence[str]) -> pl.DataFrame | None:
        """The rows kept with ``withdrawn`` taken out (one occurrence each); the state is unchanged.
        Raises ``ValueError`` for a row not kept. O(rows kept)."""
        if withdrawn is None or withdrawn.is_empty():
            return self.rows
        if self.rows is None:
            raise ValueError(f"withdraws {withdrawn.height} row(s) of the table, which has none")
        return remove_occurrences(self.rows, withdrawn.select(columns), "the table")

    def folded(
        self, added: pl.DataFrame | None, withdrawn: pl.DataFrame | None, columns: Sequence[str]
    ) -> pl.DataFrame | None:
        """The rows kept after withdrawing rows, then adding new ones (each projected on ``columns``); the
        state is unchanged."""
        rows = self.without(withdrawn, columns)
        if added is not None and added.height:
            new = added.select(columns)
            rows = new if rows is None else pl.concat([rows, new])
        return rows


def row_cache(state: SindState, public: Sequence[str]) -> RowCache:
    """The state's :class:`RowCache` of the ``public`` attributes, brought up to its rows (arrivals are
    appended: O(new rows); a withdrawal dropped it)."""
    assert state.rows is not None
    cache = state.cache
    if cache is None or len(cache.members) > state.rows.height:
        cache = state.cache = RowCache()
    if len(cache.members) < state.rows.height:
        cache.extend(public, state.rows.slice(len(cache.members)))
    return cache


def _among_sorted(values: np.ndarray[Any, Any], ordered: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Whether each of ``values`` is in the sorted ``ordered``."""
    if not ordered.size:
        return np.zeros(values.size, dtype=bool)
    at = np.minimum(np.searchsorted(ordered, values), ordered.size - 1)
    found: np.ndarray[Any, Any] = ordered[at] == values
    return found


def appended_after(rows: pl.DataFrame | None, added: pl.DataFrame | None) -> int:
    """How many first rows of ``rows`` (a state's rows after a batch) were there before the batch appended
    ``added`` (withdrawals take rows out, never add): those form a key already."""
    if rows is None:
        return 0
    return rows.height - (added.height if added is not None else 0)


@dataclass(frozen=True)
class SindCheck:
    """k-SIND over the views of a table; ``public`` is B, ``sensitive`` the private attributes."""

    views: tuple[ViewDefinition, ...]
    public: tuple[str, ...]
    sensitive: tuple[str, ...]
    k: int = 2
    table_source: str | None = field(default=None, compare=False)
    #: Declared domains of private attributes; an attribute not listed has the open domain (``_domain``).
    domains: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    max_pairs: int = MAX_PAIRS
    max_component: int = MAX_COMPONENT
    #: The sensitive attributes whose classes are reported (empty: all). The rows keep every sensitive
    #: attribute whatever this says: the others act as public values in a view.
    examined: tuple[str, ...] = ()

    @classmethod
    def from_topology(cls, topology: Topology, k: int | None = None) -> SindCheck:
        """The check as configured; the table's rows come with the data (``table.source``)."""
        public, threshold = publisher_settings(topology, "sind", k)
        return cls(topology.views, public, topology.table.sensitive, threshold, topology.table.source)

    @property
    def examining(self) -> tuple[str, ...]:
        """The sensitive attributes whose classes it reports: ``examined``, else every one."""
        return self.examined or self.sensitive

    def exact_for(self, sensitive: str) -> bool:
        """True when no selection mentions ``sensitive`` (Proposition 5 applies)."""
        return all(sensitive not in view.selection_attributes for view in self.views)

    def initialize(self) -> SindState:
        """No rows seen."""
        return SindState()

    def update(
        self, state: SindState, table_rows: pl.DataFrame | None, retracted: pl.DataFrame | None = None
    ) -> Delta[SindFinding]:
        """Withdraw rows of the private table, add new ones; return the findings raised and cleared. The
        findings before are those of the last update (cached in the state): one recomputation each."""
        before = state.findings if state.findings is not None else self.result(state) if state.rows is not None else []
        self.fold(state, table_rows, retracted)
        after = self.result(state) if state.rows is not None else []
        state.findings = after
        return diff(before, after)

    def refusal(
        self, rows: pl.DataFrame | None, known: int = 0, hashes: np.ndarray[Any, Any] | None = None
    ) -> str | None:
        """Why the table's rows cannot be checked (the public attributes are not a key), or None. ``known``:
        how many first rows are a key already (a state's rows before a batch appended its own): then only
        the rows after them are looked at, among themselves and against those (O(batch) hashing, not a
        whole duplicate scan), and the whole scan runs only to name a repeated row. ``hashes``: the sorted
        hashes of those first rows' public values (:attr:`SindState.key_hashes`), when the caller has them:
        the rows after are looked up among them (a hit is checked exactly, by the join)."""
        if rows is None:
            return None
        if known:
            public = list(self.public)
            fresh = rows.slice(known).select(public)
            if hashes is not None and hashes.size == known:
                looked_up = fresh.hash_rows().to_numpy()
                if np.unique(looked_up).size == looked_up.size and not _among_sorted(looked_up, hashes).any():
                    return None
            earlier = rows.head(known).select(public)
            if (
                not fresh.is_duplicated().any()
                and fresh.join(earlier, on=public, how="semi", nulls_equal=True).is_empty()
            ):
                return None
        duplicates = rows.select(self.public).is_duplicated()
        if not duplicates.any():
            return None
        row = int(duplicates.arg_max() or 0)
        return (
            f"the public attributes ({', '.join(self.public)}) are not a key of the table, as SIND assumes: "
            f"row {row + 1} repeats another row's public values"
        )

    def refusal_after(
        self, state: SindState, rows: pl.DataFrame | None, added: pl.DataFrame | None, withdrawn: pl.DataFrame | None
    ) -> str | None:
        """:meth:`refusal` of ``rows``, the state's rows after withdrawing ``withdrawn`` and adding ``added``
        (:meth:`SindState.folded`); the state's key hashes are built when missing (and used when nothing is
        withdrawn: the rows kept are then the state's, in order)."""
        hashes = None
        if (withdrawn is None or withdrawn.is_empty()) and state.rows is not None:
            if state.key_hashes is None or state.key_hashes[0]() is not state.rows:
                made = np.sort(state.rows.select(self.public).hash_rows().to_numpy())
                state.key_hashes = (weakref.ref(state.rows), made)
            hashes = state.key_hashes[1]
        return self.refusal(rows, known=appended_after(rows, added), hashes=hashes)

    def fold(self, state: SindState, table_rows: pl.DataFrame | None, retracted: pl.DataFrame | None) -> None:
        """Withdraw, then add rows; nothing is recomputed. Refused (``TopologyError``, the state unchanged)
        when the public attributes would not be a key."""
        rows = state.folded(table_rows, retracted, [*self.public, *self.sensitive])
        problem = self.refusal_after(state, rows, table_rows, retracted)
        if problem is not None:
            raise TopologyError(problem, file=self.table_source)
        if retracted is not None and retracted.height:
            state.cache = None  # rows left from the middle: positions moved
        elif state.key_hashes is not None and state.key_hashes[0]() is state.rows and rows is not None:
            hashes = state.key_hashes[1]
            if table_rows is not None and table_rows.height:
                fresh = np.sort(table_rows.select(self.public).hash_rows().to_numpy())
                hashes = np.insert(hashes, np.searchsorted(hashes, fresh), fresh)
            state.key_hashes = (weakref.ref(rows), hashes)
        state.rows = rows

    def row_cache(self, state: SindState) -> RowCache:
        """The state's :class:`RowCache`, brought up to its rows (:func:`row_cache`)."""
        return row_cache(state, self.public)

    def _signature(self, rows: pl.DataFrame, view: ViewDefinition, sensitive: str, domain: Sequence[Any]) -> pl.Expr:
        projected = [a for a in view.attributes if a != sensitive]
        # A constant column as long as the table (a bare literal would not broadcast inside a struct).
        always = pl.repeat(True, pl.len())
        values = pl.struct(projected) if projected else always
        if view.where is None:
            return values
        if self.exact_for(sensitive):
            return pl.when(to_polars(view.where, rows.schema).fill_null(False)).then(values)
        # Conservative: which values of P satisfy the selection once b is substituted.
        satisfied = [to_polars(view.where, rows.schema, {sensitive: value}).fill_null(False) for value in domain]
        mask = pl.concat_list(satisfied)
        return pl.struct(mask.alias("satisfied"), pl.when(pl.any_horizontal(satisfied)).then(values).alias("values"))

    def result(self, state: SindState) -> list[SindFinding]:
        """Every SIND class below k or with a single possible private value, per sensitive attribute."""
        if state.rows is None or state.rows.is_empty():
            return []
        findings: list[SindFinding] = []
        for sensitive in self.examining:
            findings.extend(self._classes(state, sensitive))
        return findings

    def _relevant(self, sensitive: str) -> list[ViewDefinition]:
        """The views a signature for ``sensitive`` reads: those projecting it (and, in the conservative case,
        those whose selection reads it)."""
        exact = self.exact_for(sensitive)
        return [
            v for v in self.views if sensitive in v.attributes or (not exact and sensitive in v.selection_attributes)
        ]

    def partition(self, state: SindState, sensitive: str) -> list[SindClass]:
        """The SIND classes of the public tuples seen, for one sensitive attribute (Figure 4(c))."""
        if state.rows is None or state.rows.is_empty():
            return []
        exact = self.exact_for(sensitive)
        views = tuple(sorted(view.name for view in self._relevant(sensitive)))
        cache = self.row_cache(state)
        listed = cache.members
        classes = [
            SindClass(tuple(listed[row] for row in rows_of), tuple(rows_of), views, exact)
            for rows_of in self._blocks(state, sensitive).to_list()
        ]
        order = cache.keys
        return sorted(classes, key=lambda c: order[c.rows[0]])

    def _keys(self, state: SindState, sensitive: str) -> pl.Series:
        """Each row's signature as one text key: equal keys, one class."""
        assert state.rows is not None
        rows = state.rows
        relevant = self._relevant(sensitive)
        if not self.exact_for(sensitive):  # the domain (values of P in the table) moves every row's signature
            return self._signature_keys(rows, relevant, sensitive, self._domain(rows, sensitive))
        # A row's signature is its own: the cached keys, extended by the rows that arrived.
        cache = self.row_cache(state)
        known = cache.signatures.get(sensitive)
        done = 0 if known is None else known.len()
        if done < rows.height:
            fresh = self._signature_keys(rows.slice(done), relevant, sensitive, [])
            cache.signatures[sensitive] = fresh if known is None else pl.concat([known, fresh])
        return cache.signatures[sensitive]

    def _blocks(self, state: SindState, sensitive: str) -> pl.Series:
        """The classes as lists of row positions, each sorted by the public values (a polars list column;
        in no particular order)."""
        assert state.rows is not None
        rows = state.rows
        keys = self._keys(state, sensitive)
        # Members of every class in one sorted frame, cut into classes in one pass (no per-class frames).
        members = (
            pl.DataFrame({"\0key": keys})
            .with_row_index("\0row")
            .group_by("\0key")
            .agg(pl.col("\0row"))
            .with_row_index("\0block")
            .select("\0block", "\0row")
            .explode("\0row")
            .join(rows.select(self.public).with_row_index("\0row"), on="\0row")
            .sort(["\0block", *self.public])
            .select("\0block", "\0row")
        )
        return members.group_by("\0block", maintain_order=True).agg(pl.col("\0row")).get_column("\0row")

    def _signature_keys(
        self, rows: pl.DataFrame, relevant: Sequence[ViewDefinition], sensitive: str, domain: Sequence[Any]
    ) -> pl.Series:
        """Each row's signature over the ``relevant`` views as one text (per view, its JSON text, or
        true/false, joined by a character JSON never leaves unescaped): equal texts, equal signatures."""
        if not relevant:
            return pl.Series("\0key", [""] * rows.height, dtype=pl.String)
        parts = []
        for view in relevant:
            signature = self._signature(rows, view, sensitive, domain)
            typed = rows.select(signature.alias("\0q")).to_series()
            text = typed.cast(pl.String) if typed.dtype == pl.Boolean() else typed.struct.json_encode()
            parts.append(text.fill_null("\0null"))
        return (
            pl.DataFrame(parts, schema=[f"\0q{i}" for i in range(len(parts))])
            .select(pl.concat_str(pl.all(), separator="\x1f").alias("\0key"))
            .to_series()
        )

    def _domain(self, rows: pl.DataFrame, sensitive: str) -> list[Any]:
        """Representatives of Dom(P) for the conservative signatures: the table's values, the literals
        the selections compare P with, values beside each literal, and one value unlike all of them.
        More representatives only split classes further, which keeps the check conservative."""
        values = set(rows.get_column(sensitive).drop_nulls().to_list())
        return self._domain_of(rows.schema[sensitive], values, sensitive)

    def _domain_of(self, dtype: pl.DataType, values: set[Any], sensitive: str) -> list[Any]:
        """:meth:`_domain` from the table's (non-null) values of P, of type ``dtype``."""
        literals = {
            v for view in self.views if view.where is not None for a, v in literals_of(view.where) if a == sensitive
        }
        values |= literals
        if dtype.is_numeric():
            step = 1 if dtype.is_integer() else 0.5
            numbers = [v for v in values if isinstance(v, (int, float))]
            values |= {v + d for v in literals if isinstance(v, (int, float)) for d in (-step, step)}
            values |= {max(numbers, default=0) + 1, min(numbers, default=0) - 1}
        elif dtype == pl.String():
            values.add("\0any other value")
        return sorted(values, key=str)

    def _classes(self, state: SindState, sensitive: str) -> list[SindFinding]:
        """Findings from the partition and the certainty of its classes (module docstring).

        Classes whose members can take only their one current value v are one SIND class whatever their
        signatures (swapping v for v changes nothing), so they are merged per value into one finding.
        """
        assert state.rows is not None
        fast = self._certain_classes(state, sensitive)
        if fast is not None:
            return fast
        current = state.rows.get_column(sensitive).to_list()
        blocks = self.partition(state, sensitive)
        # Members of a class swap values: two current values in a class give each member two possible ones.
        uniform = [block for block in blocks if len({current[i] for i in block.rows}) == 1]
        verdicts: dict[int, bool | None] = {}
        oracle = self._oracle(state.rows, sensitive) if uniform else None
        try:
            for block in uniform:
                verdicts[block.rows[0]] = oracle.only_value(block.rows[0]) if oracle is not None else None
            if oracle is not None and any(verdict is not True for verdict in verdicts.values()):
                # (Nothing to compare when every uniform class is certain: they are merged per value below.)
                blocks = self._join_never_differing(blocks, verdicts, oracle)
            certain: dict[Any, list[SindClass]] = {}
            findings = []
            for block in blocks:
                verdict = verdicts.get(block.rows[0], False)
                if verdict is True:
                    certain.setdefault(current[block.rows[0]], []).append(block)
                elif len(block.members) < self.k:
                    reason = f"class of {len(block.members)} public tuple(s), fewer than k = {self.k}"
                    if verdict is None:  # its members might be certain, hence SIND with other certain tuples
                        assert oracle is not None
                        reason += (
                            f" (whether its members can take other values is {oracle.reason_undecided(block.rows[0])})"
                        )
                    findings.append(
                        SindFinding(
                            self.k, sensitive, block.members, block.views, reason, block.exact and verdict is False
                        )
                    )
                elif verdict is None:
                    assert oracle is not None
                    reason = f"every member may take only one private value: {oracle.reason_undecided(block.rows[0])}"
                    findings.append(SindFinding(self.k, sensitive, block.members, block.views, reason, False))
        finally:
            if oracle is not None:
                oracle.close()
        cache = self.row_cache(state)
        for merged in certain.values():
            rows = sorted((row for block in merged for row in block.rows), key=cache.keys.__getitem__)
            members = tuple(cache.members[row] for row in rows)
            text = "[" + ",".join([cache.texts[row] for row in rows]) + "]"
            views = tuple(sorted({view for block in merged for view in block.views}))
            findings.append(SindFinding(self.k, sensitive, members, views, CERTAIN, True, members_text=text))
        return sorted(findings, key=lambda f: [str(v) for _, v in f.members[0]])

    def _certain_classes(self, state: SindState, sensitive: str) -> list[SindFinding] | None:
        """:meth:`_classes` without a Python object per class, in the exact subcase when no class needs a
        SAT call: every class whose members hold one current value has members with a single candidate
        value (then they are all certain, merged per value), or none holds one value. None otherwise (the
        general path). In the exact subcase members of a class share every view's projection, hence their
        candidates: a class is pinned or not as a whole. On BP every tuple is pinned by the one view
        holding P: 41,699 classes of one tuple, eight findings. The classes are kept under arrivals
        (:mod:`.kept_classes`): an update costs its rows, array operations over the classes, and the
        findings it changed."""
        assert state.rows is not None
        if not self.exact_for(sensitive):
            return None
        rows = state.rows
        keys = self._keys(state, sensitive)
        cache = self.row_cache(state)
        kept = cache.classes.get(sensitive)
        if kept is None:
            kept = cache.classes[sensitive] = KeptClasses(sensitive, self._holding(sensitive))
        if kept.rows < rows.height:
            kept.extend(rows.slice(kept.rows), keys.slice(kept.rows).to_list())
        uniform = ~kept.several
        if uniform.any():
            pinned = self._pinned_firsts(rows, sensitive, kept, kept.first[uniform])
            if pinned is None or not pinned.all():
                return None
        views = tuple(sorted(view.name for view in self._relevant(sensitive)))
        findings: list[tuple[tuple[str, ...], SindFinding]] = []
        small = np.flatnonzero(kept.several & (kept.size < self.k))
        if small.size:  # their members in the order of their public values, as the general path lists them
            members_of = np.flatnonzero(np.isin(kept.row_class, small))
            ordered = (
                rows.select(self.public)[members_of]
                .with_columns(
                    pl.Series("\0class", kept.row_class[members_of]), pl.Series("\0row", members_of, dtype=pl.UInt32)
                )
                .sort(["\0class", *self.public])
                .group_by("\0class", maintain_order=True)
                .agg(pl.col("\0row"))
            )
            for rows_of in ordered.get_column("\0row").to_list():
                members = tuple(cache.members[row] for row in rows_of)
                reason = f"class of {len(members)} public tuple(s), fewer than k = {self.k}"
                finding = SindFinding(self.k, sensitive, members, views, reason, True)
                findings.append((cache.keys[rows_of[0]], finding))
        # Per value, its certain members in the order of their keys, their texts joined; a value's finding
        # is made again only when its members changed.
        order = cache.in_order()
        certain = order[uniform[kept.row_class[order]]]
        codes = kept.code[certain]
        by_value = np.argsort(codes, kind="stable")
        certain, codes = certain[by_value], codes[by_value]
        starts = code_arrays.run_starts(codes)
        ends = [*starts[1:].tolist(), codes.size] if starts.size else []
        made: dict[int, tuple[np.ndarray[Any, Any], SindFinding]] = {}
        for start, end in zip(starts.tolist(), ends, strict=True):
            code, members_at = int(codes[start]), certain[start:end]
            earlier = kept.made.get(code)
            if earlier is not None and np.array_equal(earlier[0], members_at):
                finding = earlier[1]
            else:
                # (itemgetter takes tens of thousands of members at C speed; one member is not a tuple.)
                listed = itemgetter(*members_at.tolist())
                members = listed(cache.members) if members_at.size > 1 else (listed(cache.members),)
                text = ",".join(listed(cache.texts)) if members_at.size > 1 else listed(cache.texts)
                finding = SindFinding(self.k, sensitive, members, views, CERTAIN, True, members_text=f"[{text}]")
            made[code] = (members_at, finding)
            findings.append((cache.keys[int(members_at[0])], finding))
        kept.made = made
        return [finding for _, finding in sorted(findings, key=lambda pair: pair[0])]

    def _holding(self, sensitive: str) -> Holding | None:
        """The one view projecting ``sensitive``, as it pins rows, when it alone decides which are (no
        domain declared); None when the oracle decides."""
        holding = [view for view in self._relevant(sensitive) if sensitive in view.attributes]
        if len(holding) != 1 or self.domains.get(sensitive) is not None:
            return None
        return Holding(holding[0])

    def _pinned_firsts(
        self, rows: pl.DataFrame, sensitive: str, kept: KeptClasses, firsts: np.ndarray[Any, Any]
    ) -> np.ndarray[Any, Any] | None:
        """Whether each of ``firsts`` (row positions) is pinned (:meth:`_pinned`), from the classes kept
        when one view decides it; None when the question is beyond the oracle's budget."""
        if kept.holding is None:
            pinned = self._pinned(rows, sensitive)
            return None if pinned is None else np.isin(firsts, pinned.to_numpy())
        size = len(self._domain_of(rows.schema[sensitive], kept.non_null_values(), sensitive))
        if rows.height * size > self.max_pairs:
            return None
        return kept.holding.pinned(firsts, kept.null_rows(firsts))

    def _pinned(self, rows: pl.DataFrame, sensitive: str) -> pl.Series | None:
        """The rows whose every instance gives them their current value, in the exact subcase, or None when
        the question is beyond the oracle's budget (as :func:`build_oracle` says it). A row's candidates are
        the values of P that every view projecting P and selecting it publishes beside its projection; a
        row no such view selects can take any value. With one such view, those whose projection shows one
        value of P; with several, the oracle's candidates."""
        domain = self.domains.get(sensitive)
        size = len(domain) if domain is not None else len(self._domain(rows, sensitive))
        if rows.height * size > self.max_pairs:
            return None
        holding = [view for view in self._relevant(sensitive) if sensitive in view.attributes]
        if len(holding) != 1 or domain is not None:
            oracle = self._oracle(rows, sensitive)
            try:
                return oracle.pinned()
            finally:
                oracle.close()
        view = holding[0]
        others = [a for a in view.attributes if a != sensitive]
        numbered = rows.with_row_index("\0row")
        if view.where is not None:
            numbered = numbered.filter(to_polars(view.where, rows.schema).fill_null(False))
        if not others:
            single = numbered.get_column(sensitive).drop_nulls().n_unique() == 1
            return numbered.get_column("\0row") if single else numbered.get_column("\0row").clear()
        shown = numbered.drop_nulls(sensitive).group_by(others).agg(pl.col(sensitive).n_unique().alias("\0n"))
        # A row whose own value is null is fixed by the oracle (null is its one candidate).
        fixed = numbered.filter(pl.col(sensitive).is_null()).get_column("\0row")
        one = numbered.join(shown.filter(pl.col("\0n") == 1), on=others, how="semi", nulls_equal=True)
        return pl.concat([one.get_column("\0row"), fixed]).cast(pl.UInt32)

    def _join_never_differing(
        self, blocks: list[SindClass], verdicts: Mapping[int, bool | None], oracle: CertaintyOracle
    ) -> list[SindClass]:
        """Classes whose tuples never take different values in any instance, joined: they swap trivially,
        so they are SIND whatever their signatures (Proposition 5's "only if" needs an instance where the
        two differ, which "two possible values each" does not ensure). Only classes below k can change a
        finding, so each is compared with the other classes of its SAT component (tuples of different
        components choose independently and differ unless both are certain, merged elsewhere). Classes
        with two current values always differ. A comparison beyond the budgets makes the class inexact.
        """
        by_component: dict[int, list[int]] = {}
        for index, block in enumerate(blocks):
            # Only uniform classes have a verdict; certain ones (True) are merged per value elsewhere.
            if verdicts.get(block.rows[0], True) is not True:
                by_component.setdefault(oracle.component(block.rows[0]), []).append(index)
        parent = list(range(len(blocks)))

        def root(index: int) -> int:
            while parent[index] != index:
                parent[index] = parent[parent[index]]
                index = parent[index]
            return index

        undecided: set[int] = set()
        for indices in by_component.values():
            for position, a in enumerate(indices):
                if len(blocks[a].members) >= self.k:
                    continue
                for b in indices[:position] + indices[position + 1 :]:
                    if root(a) == root(b):
                        continue
                    differ = oracle.can_differ(blocks[a].rows[0], blocks[b].rows[0])
                    if differ is None:
                        undecided.add(a)
                    elif not differ:
                        parent[root(b)] = root(a)
        groups: dict[int, list[SindClass]] = {}
        for index, block in enumerate(blocks):
            groups.setdefault(root(index), []).append(block)
        joined = []
        for index, members in groups.items():
            if len(members) == 1:
                block = members[0]
                joined.append(block if index not in undecided else replace(block, exact=False))
                continue
            joined.append(
                SindClass(
                    tuple(m for block in members for m in block.members),
                    tuple(r for block in members for r in block.rows),
                    tuple(sorted({v for block in members for v in block.views})),
                    all(block.exact for block in members),
                )
            )
        return joined

    def _oracle(self, rows: pl.DataFrame, sensitive: str) -> CertaintyOracle:
        domain = self.domains.get(sensitive)
        return build_oracle(
            rows.select([*self.public, *self.sensitive]),
            self.views,
            sensitive,
            list(domain) if domain is not None else self._domain(rows, sensitive),
            max_pairs=self.max_pairs,
            max_component=self.max_component,
        )
