"""Exact k-anonymity by views: minimal association covers (Yao, Wang & Jajodia 2005).

Definitions (section 3): an *association cover* for an identifier value a is a set A of pairs
(a, b) such that every table instance that yields the views contains one of them; the views violate
k-anonymity when a cover smaller than k exists. Section 4: the tuple set w(p) of a projection fact
(PF, a row of a view) is a tuple cover, and (Proposition 4) every minimal tuple cover is some w(p),
so the minimal association covers are the minimal sets among {Π_{ID,P} w(p)} with |Π_ID w(p)| = 1.

Implemented subcase (section 5.2): projection-only views, no functional dependencies. There the
union of all instances T^v is the natural join of all the views (cross products between unconnected
ones), and w(p) is the set of its rows that project onto p. Every PF of *every* view is checked, not
only identifier values: the section 5.2 pitfall (views {a1} and {b1, b2}) makes {(a1, b1)} a cover
through the PF b1 of the second view, which an identifier-based count misses.

Computation: for each view u, each (ID, P) pair, the identifier values of w(p) capped at 2 and the P
values capped at k, for every PF p of u at once, by the capped variable elimination of
:mod:`streamdetect.relational.linked_values` with the PF's position as source. Exact. Incremental like
the linkage check: with arrivals only, T^v grows by the joins of the new rows with the others, so each
capped set grows by the capped values of that delta join; a PF's position in the append-only rows is
its stable id. Cost per (u, ID, P): two capped eliminations over all views.
"""

from __future__ import annotations

import weakref
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from operator import itemgetter
from typing import Any, TypeVar

import numpy as np
import polars as pl

from streamdetect.checks.batch_log import BatchLog
from streamdetect.checks.findings import AssociationCoverFinding, Delta, diff
from streamdetect.checks.k_anonymity import shared_delta
from streamdetect.checks.k_anonymity.cover_index import CoverCodes, CoverIndex
from streamdetect.checks.k_anonymity.functional_dependencies import effective_dependencies
from streamdetect.checks.k_anonymity.held_values import HeldValues
from streamdetect.checks.k_anonymity.kept_relations import PF, Filters, KeptRelations, with_positions
from streamdetect.checks.k_anonymity.repeated_projections import firsts_only
from streamdetect.checks.k_anonymity.withdrawals import Gone, Withdrawal, among
from streamdetect.checks.seen_rows import SeenRows
from streamdetect.errors import UnsupportedCase
from streamdetect.model.codecs import Encoded, as_frame, document_parts, versioned_document
from streamdetect.model.topology import Topology, ViewDefinition
from streamdetect.relational import code_arrays
from streamdetect.relational.dictionary import decode
from streamdetect.relational.linked_values import Plan, SharedWork, appended, cap_grown, in_memory, linked_values

Progress = Callable[[int, int], None]
K = TypeVar("K", bound=Hashable)
#: Marks the pairs a batch found among a set's (a name no attribute can have).
_NEW = "\0new"
#: (view holding the PFs, identifier attribute, sensitive attribute, target attribute)
SetKey = tuple[str, str, str, str]
#: What a batch added: per view, the rows that became present, their positions, and the work its runs
#: did (for the states that share the rows).
Grown = list[tuple[str, pl.DataFrame, pl.Series, SharedWork]]


@dataclass(frozen=True)
class Changes:
    """What a batch changed of the rows: those gone per view (:data:`~.withdrawals.Gone`, taken out first)
    and those that became present (:data:`Grown`)."""

    gone: Gone
    grown: Grown


@dataclass
class AssociationCoverState:
    """Rows seen per view (append-only: a row's position names its PF) and the capped sets per PF."""

    VERSION = 2
    seen: SeenRows = field(default_factory=SeenRows)
    sets: dict[SetKey, pl.DataFrame] = field(default_factory=dict)
    #: The batches taken since the last write (:mod:`streamdetect.checks.batch_log`).
    log: BatchLog = field(default_factory=BatchLog, compare=False)
    #: The findings of the rows held (with forcing views), once asked: a cache (not serialized), dropped when
    #: the rows change, so an update finds them once, not before and after, and other readers not again.
    findings: list[Any] | None = field(default=None, compare=False)
    #: The minimal covers kept between batches (:mod:`.cover_index`; not serialized, built when None), and
    #: per set, the projection facts the joins since reached (what the index looks at again).
    index: CoverIndex | None = field(default=None, compare=False, repr=False)
    touched: dict[SetKey, list[pl.Series]] = field(default_factory=dict, compare=False, repr=False)
    #: Per set, what each PF holds (:mod:`.held_values`; not serialized, built from the set): a PF at its
    #: cap is *saturated*, its set never changes under arrivals, and it leaves the delta joins.
    held: dict[SetKey, HeldValues] = field(default_factory=dict, compare=False, repr=False)
    #: The sets whose ``held`` is their twin's object (:meth:`AssociationCoverCheck._set_keys`).
    borrowed: set[SetKey] = field(default_factory=set, compare=False, repr=False)
    #: The stored views' projections and the capped forms kept with them (:mod:`.kept_relations`; not
    #: serialized). Shared with the subset states, which share the rows.
    kept: KeptRelations = field(default_factory=KeptRelations, compare=False, repr=False)
    #: The findings of the last result, by cover and views, the views per cover they were made for (the
    #: caller's mapping when it named them), and their sorted list (not serialized): the next result looks
    #: only at the covers whose views changed, and returns the same list when none did.
    reported: dict[tuple[CoverCodes, tuple[str, ...]], tuple[AssociationCoverFinding, Any]] = field(
        default_factory=dict, compare=False, repr=False
    )
    reported_from: Mapping[CoverCodes, frozenset[str]] | None = field(default=None, compare=False, repr=False)
    listed: list[AssociationCoverFinding] | None = field(default=None, compare=False, repr=False)
    listed_order: list[Any] = field(default_factory=list, compare=False, repr=False)
    #: The last result's list before it, and the findings it raised and cleared (not serialized).
    listed_changes: tuple[list[AssociationCoverFinding] | None, Delta[AssociationCoverFinding]] | None = field(
        default=None, compare=False, repr=False
    )

    #: States of the check over subsets of the views for some (identifier, sensitive) pairs (the
    #: forcing-view search's: ``join_search.SubsetState``), sharing ``seen`` and grown by its rows when asked.
    #: Not serialized; dropped when the sets are recomputed, or when searches stop asking for them.
    subsets: dict[tuple[frozenset[str], frozenset[tuple[str, str]]], Any] = field(
        default_factory=dict, compare=False, repr=False
    )
    #: The last forcing-view search (``join_search.Search``; not serialized): its findings stand while the
    #: covers it read do not change.
    search: Any = field(default=None, compare=False, repr=False)
    #: Per subset of the views run for some covers alone, its answers per cover (``join_search.Answers``;
    #: not serialized), kept while the subset's views keep their rows.
    answers: dict[frozenset[str], Any] = field(default_factory=dict, compare=False, repr=False)
    #: Elimination orders of the delta joins, per (set, changed view, size classes of the relations), and of
    #: the forcing-view search's runs for some covers alone (the view named ``targeted`` and the subset's
    #: views): a batch replays them instead of estimating again (not serialized).
    plans: dict[tuple[SetKey, str, tuple[int, ...]], Plan] = field(default_factory=dict, compare=False, repr=False)
    #: Per set, its holder's stored relation without the PFs saturated when it was cut, and that relation
    #: (:meth:`AssociationCoverCheck._opened`; not serialized): kept while the holder's relation is the same.
    opened: dict[SetKey, tuple[weakref.ref[pl.DataFrame], int, pl.DataFrame]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def changes(
        self, before: list[AssociationCoverFinding], after: list[AssociationCoverFinding]
    ) -> Delta[AssociationCoverFinding]:
        """The findings raised and cleared from ``before`` to ``after``: those the last result changed when
        it went from one to the other (no pass over every finding), their diff otherwise."""
        if before is after:
            return Delta(raised=(), cleared=())
        kept = self.listed_changes
        if kept is not None and kept[0] is before and self.listed is after:
            return kept[1]
        return diff(before, after)

    def to_parts(self) -> Encoded:
        """Serialize (a versioned document with Arrow IPC frames), as the parts of its bytes."""
        document = {
            "version": self.VERSION,
            "seen": self.seen.to_document(),
            "sets": [[*key, frame] for key, frame in self.sets.items()],
            "written": self.log.written,
        }
        return document_parts(document)

    def to_bytes(self) -> bytes:
        """:meth:`to_parts` joined."""
        return self.to_parts().joined()

    @classmethod
    def from_bytes(cls, data: bytes | memoryview) -> AssociationCoverState:
        """Inverse of :meth:`to_bytes`; refuses a state of another version."""
        document = versioned_document(data, cls.VERSION, "association-cover")
        return cls(
            seen=SeenRows.from_document(document["seen"]),
            sets={(u, e, s, t): as_frame(frame) for u, e, s, t, frame in document["sets"]},
            log=BatchLog(written=document["written"]),
        )


@dataclass(frozen=True)
class AssociationCoverCheck:
    """k-anonymity by views, exact, for projection-only views without functional dependencies."""

    views: tuple[ViewDefinition, ...]
    identifiers: tuple[str, ...]
    sensitive: tuple[str, ...]
    k: int = 2

    @classmethod
    def from_topology(cls, topology: Topology, k: int | None = None) -> AssociationCoverCheck:
        """The join-based check for the topology; refuses the subcases it does not decide exactly
        (selections, effective FDs), which :func:`streamdetect.checks.k_anonymity.methods.choose_method`
        sends to the other methods."""
        for i, view in enumerate(topology.views):
            if view.where is not None:
                raise UnsupportedCase(
                    f"views[{i}] ({view.name}) has a selection: the join-based method is for projection-only "
                    "views (k_anonymity_check picks the cell procedure)"
                )
        if effective_dependencies(topology.views, topology.table.functional_dependencies):
            raise UnsupportedCase(
                "some functional dependency is effective for these views (Yao et al. 6.1): the exact method "
                "does not apply (k_anonymity_check picks the FD methods)"
            )
        threshold = topology.threshold("k-anonymity", k)
        return cls(topology.views, topology.table.identifiers, topology.table.sensitive, threshold)

    @property
    def pairs(self) -> list[tuple[str, str]]:
        """(ID, P) pairs that occur in the views."""
        present = {a for view in self.views for a in view.attributes}
        return [(e, s) for e in self.identifiers if e in present for s in self.sensitive if s in present]

    def initialize(self) -> AssociationCoverState:
        """An empty state."""
        return AssociationCoverState()

    def needed(self, identifier: str, sensitive: str, target: str) -> dict[str, tuple[list[str], Filters]]:
        """Per view, the attributes a capped set of the pair with this target reads: the target and the
        attributes two views share; and the pair's other attribute where a view holds it unshared, as a
        filter only (a row with a null there is left out of the pair's join: null never joins), or as the
        view's one column when it has nothing else read. Any other attribute of a view only repeats its
        rows."""
        counts: dict[str, int] = {}
        for view in self.views:
            for attribute in view.attributes:
                counts[attribute] = counts.get(attribute, 0) + 1
        keep = {target} | {a for a, count in counts.items() if count > 1}
        needed: dict[str, tuple[list[str], Filters]] = {}
        for view in self.views:
            columns = [a for a in view.attributes if a in keep]
            others = [a for a in view.attributes if a in {identifier, sensitive} - keep]
            # A view with nothing else read keeps the other attribute as its column: it then only says
            # whether the pair's join is empty, which its rows with a null there do not make it.
            needed[view.name] = (columns, tuple(others)) if columns else (others, ())
        return needed

    def cap(self, identifier: str, target: str) -> int:
        """The cap of a set of ``target`` values: 2 for the identifier (one value, or more), k for the
        sensitive attribute (fewer than k, or not)."""
        return 2 if target == identifier else self.k

    def reads(self, key: SetKey) -> dict[str, tuple[list[str], Filters]]:
        """The views a capped set of ``key`` reads, in view order, with their attributes and filters
        (:meth:`needed`): its holder, and every view with an attribute read (one sharing nothing read only
        has to be non-empty, and every view read is: :meth:`released`)."""
        holder, identifier, sensitive, target = key
        needed = self.needed(identifier, sensitive, target)
        return {name: read for name, read in needed.items() if read[0] or name == holder}

    def _set_keys(self, seen: SeenRows) -> list[tuple[SetKey, int, SetKey | None]]:
        """Every capped set kept (holder, identifier, sensitive, target) with its cap and, when an earlier
        key is the same set, that key. w(p) does not depend on the pair, so an identifier's set is the same
        for its pairs with every sensitive attribute (and the reverse) as long as the attribute that tells
        the pairs apart holds no null in the rows kept (a null leaves its row out of its pair's join)."""
        nullable = {a for name, rows in seen.rows.items() for a in rows.columns if rows.get_column(a).null_count()}
        keys: list[tuple[SetKey, int, SetKey | None]] = []
        first: dict[tuple[str, str], SetKey] = {}
        for identifier, sensitive in self.pairs:
            for holder in self.views:
                for target in (identifier, sensitive):
                    cap = self.cap(identifier, target)
                    key = (holder.name, identifier, sensitive, target)
                    twin = first.get((holder.name, target))
                    if twin is not None and ({twin[1], twin[2], identifier, sensitive} - {target}) & nullable:
                        twin = None
                    keys.append((key, cap, twin))
                    first.setdefault((holder.name, target), key)
        return keys

    def update(
        self,
        state: AssociationCoverState,
        batch: Mapping[str, pl.DataFrame],
        progress: Progress | None = None,
        retracted: Mapping[str, pl.DataFrame] | None = None,
    ) -> Delta[AssociationCoverFinding]:
        """Withdraw ``retracted`` rows and add new rows of one or more views; return the covers raised and
        cleared. Exact."""
        before = self.result(state) if state.sets else []
        self.add(state, batch, progress, retracted)
        return diff(before, self.result(state))

    def add(
        self,
        state: AssociationCoverState,
        batch: Mapping[str, pl.DataFrame],
        progress: Progress | None = None,
        retracted: Mapping[str, pl.DataFrame] | None = None,
    ) -> Changes | None:
        """The work of :meth:`update` without the diff: for a caller that reads the result its own way. The
        rows gone and those that became present per view with their positions (:class:`Changes`), or None
        when the sets were recomputed.

        Withdrawals (``retracted``) are exact and incremental: the sets of the projection facts whose joins
        a row gone was in are computed again (:mod:`.withdrawals`), the others stay. A batch that empties a
        view, or gives a view its first rows, recomputes every set from the rows present (the cost of a
        batch check): the view leaves or joins the views read (:meth:`released`), and T^v changes whole.
        """
        attributes = {view.name: list(view.attributes) for view in self.views}
        unknown = [name for name in batch if name not in attributes]
        if unknown:
            raise KeyError(f"unknown view {unknown[0]!r}")
        gone: Gone = []
        for name, frame in (retracted or {}).items():
            if frame.height:
                rows, positions = state.seen.retract(name, frame, attributes[name])
                if rows.height:
                    gone.append((name, rows, positions))
        emptied = any(not state.seen.height(name) for name, _, _ in gone)
        # A view that gets its first rows joins T^v and shrinks it (non-monotone), like an emptied one.
        first = [name for name, frame in batch.items() if frame.height and not state.seen.height(name)]
        if emptied or first:
            for name, frame in batch.items():
                state.seen.add(name, frame, attributes[name])
            state.sets = self.recompute(state.seen).sets
            state.index, state.touched, state.held, state.borrowed = None, {}, {}, set()
            state.opened = {}
            if progress is not None:
                progress(1, 1)
            return None
        active = self.released(state.seen)
        if gone:
            active.withdraw(state, gone)
        total = len(batch) * len(active.pairs) * len(active.views) * 2
        done = 0
        grown: Grown = []
        for name, frame in batch.items():
            new, positions = state.seen.add(name, frame, attributes[name])
            shared = SharedWork(state.kept.caps)
            grown.append((name, new, positions, shared))
            done = active._grow_by(state, name, new, positions, shared, progress, (done, total))
        return Changes(gone, grown)

    def withdraw(self, state: AssociationCoverState, gone: Gone) -> None:
        """Take the rows ``gone`` (no longer present in ``state.seen``, no view emptied) out of the sets: the
        projection facts they reached get their sets from the rows present (:mod:`.withdrawals`), told to
        the cover index as touched."""
        withdrawal = Withdrawal(state.seen, state.kept, gone, SharedWork(state.kept.caps), state.plans)
        state.opened = {}  # PFs whose sets are computed again are open again
        changed = {name for name, _, _ in gone}
        for key, cap, twin in self._set_keys(state.seen):
            if twin is not None:
                _share(state, key, twin)
                continue
            if key in state.borrowed:  # no longer its twin's set
                state.borrowed.discard(key)
                state.held.pop(key, None)
            current = state.sets.get(key)
            reads = self.reads(key)
            if current is None or changed.isdisjoint(reads):
                continue  # no join before, none now; or no view it reads lost rows
            reached = withdrawal.reached(key, reads)
            if not reached.size:
                continue
            found = withdrawal.recomputed(key, reads, reached, cap)
            kept = current.filter(pl.Series(~among(current.get_column(PF).to_numpy(), reached)))
            state.sets[key] = appended(kept, found.select(current.columns))
            held = state.held.get(key)
            if held is not None:
                held.extend(state.seen.rows[key[0]].height)
                held.clear(reached)
                positions = found.get_column(PF).to_numpy()
                if held.values is None:
                    held.count(positions)
                else:
                    held.merge(positions, found.get_column(key[3]).to_numpy())
            state.touched.setdefault(key, []).append(pl.Series(PF, reached, dtype=pl.UInt32))

    def grow(self, state: AssociationCoverState, grown: Grown) -> None:
        """Grow a state that shares its rows (``seen``) with another by the rows :meth:`add` added there
        (a check over some of the views keeps up with the check over all of them)."""
        active = self.released(state.seen)
        names = {view.name for view in active.views}
        for name, new, positions, shared in grown:
            if name in names:
                # The batch's work shared with the other states' runs: a relation of the same view, role
                # and attributes is the same frame, and an elimination over the same frames runs once.
                active._grow_by(state, name, new, positions, shared)

    def _grow_by(  # noqa: PLR0917 -- private; the update loop passes its whole context
        self,
        state: AssociationCoverState,
        name: str,
        new: pl.DataFrame,
        positions: pl.Series,
        shared: SharedWork,
        progress: Progress | None = None,
        done: tuple[int, int] = (0, 0),
    ) -> int:
        """Grow every capped set by the join of ``name``'s rows ``new`` (at ``positions``) with the rows
        present; ``progress`` told of each set, counting from ``done`` (sets done, total). The sets done."""
        count, total = done
        keys = self._set_keys(state.seen)
        # The sets answered by one join of the rows with every view (:mod:`.shared_delta`); the others run.
        answered = shared_delta.grown_sets(self, state, name, (new, positions), keys=keys) if new.height else None
        for key, cap, twin in keys:
            if new.height:
                found = answered.get(key) if answered is not None else None
                self._apply(state, key, twin, name, new, positions, cap, shared, found)
            count += 1
            if progress is not None:
                progress(count, total)
        return count

    def _apply(  # noqa: PLR0917 -- private; the update loop passes its whole context
        self,
        state: AssociationCoverState,
        key: SetKey,
        twin: SetKey | None,
        changed: str,
        new_rows: pl.DataFrame,
        positions: pl.Series,
        cap: int,
        shared: SharedWork,
        answered: pl.DataFrame | None = None,
    ) -> None:
        """Grow ``key``'s set by the join of ``new_rows`` with the rows present, or take its twin's (the
        same set, grown already: :meth:`_set_keys`). ``answered``: the pairs the join gives it, when the
        shared join of the batch's rows gave them (:mod:`.shared_delta`)."""
        if twin is not None:
            _share(state, key, twin)
            return
        if key in state.borrowed:  # no longer its twin's set (a null now tells the pairs apart)
            state.borrowed.discard(key)
            state.held.pop(key, None)
        if answered is not None:
            if answered.height:
                self._take(state, key, answered, cap)
            return
        holder, _, _, target = key
        reads = self.reads(key)
        relations: dict[str, pl.DataFrame] = {}
        for name, (attributes, filters) in reads.items():
            if name != changed:
                # The stored view's projection, the same frame between batches while the view does not
                # change (:mod:`.kept_relations`): what is computed from it is kept with it.
                relation = state.kept.relation(state.seen, name, attributes, name == holder, filters)
                if name == holder:
                    # A holder that holds the target has one value of it in all of w(p), p's own: its
                    # sets are full at one value.
                    full = 1 if target in attributes else cap
                    relation = self._opened(state, key, relation, full, shared)
                relations[name] = relation
            elif name == holder:
                # One frame per (view, role, attributes) in a batch: the (holder, target) runs of a pair
                # then share their relations, and with them their eliminations (SharedWork keys by identity).
                relations[name] = shared.remember(
                    ("relation", name, "holder", tuple(attributes), filters),
                    partial(with_positions, new_rows, attributes, positions.alias(PF), filters),
                )
            else:
                # Only the projections the view did not have: a row that repeats one on these attributes
                # joins as that one did, and adds nothing to any set.
                relations[name] = shared.remember(
                    ("relation", name, "", tuple(attributes), filters),
                    partial(state.kept.novel, state.seen, name, (attributes, filters), new_rows, positions),
                )
        copied = (
            firsts_only(self.views, state, key, relations, reads[holder], shared=shared) if changed == holder else None
        )
        # Orders only change the work: one plan per size class (factors of 4) of every relation.
        sizes = tuple(frame.height.bit_length() // 2 for frame in relations.values())
        plan = state.plans.setdefault((key, changed, sizes), Plan())
        found = linked_values(relations, PF, target, cap, shared, plan=plan)  # no pairs when a relation is empty
        if copied is not None:
            found = pl.concat([found, copied(found)], how="vertical_relaxed")
        if found.is_empty() and any(frame.is_empty() for frame in relations.values()):
            return  # no join: the set stays as it was (absent before any pair)
        self._take(state, key, found, cap)

    def _take(self, state: AssociationCoverState, key: SetKey, found: pl.DataFrame, cap: int) -> None:
        """Take the pairs ``found`` into ``key``'s set (:meth:`_merge`), telling the cover index which PFs
        took some."""
        added = self._merge(state, key, found, cap)
        if added.height:
            state.touched.setdefault(key, []).append(added.get_column(PF))

    def _merge(self, state: AssociationCoverState, key: SetKey, found: pl.DataFrame, cap: int) -> pl.DataFrame:
        """Take the pairs ``found`` into ``key``'s set (those it does not hold, up to the cap per PF); return
        those taken."""
        current = state.sets.get(key)
        if current is None:
            state.sets[key] = found
            state.held.pop(key, None)  # built from the set when next needed
            return found
        if found.is_empty():
            return found
        target = key[3]
        held = self._held(state, key)
        if held.values is None:
            state.sets[key], added = _grown_sets(current, found, target, cap)
            held.count(added.get_column(PF).to_numpy())
            return added
        taken = held.merge(found.get_column(PF).to_numpy(), found.get_column(target).to_numpy())
        added = code_arrays.take_rows(found, taken) if len(taken) < found.height else found
        state.sets[key] = appended(current, added)
        return added

    def _opened(
        self, state: AssociationCoverState, key: SetKey, relation: pl.DataFrame, full: int, shared: SharedWork
    ) -> pl.DataFrame:
        """The holder's stored ``relation`` without the PFs whose sets are saturated (:func:`_open`), cut once
        while the relation is the same frame: under arrivals a saturated PF stays so, and a PF saturated since
        the cut only costs its joins' rows (its set takes nothing more: :meth:`_merge`), where cutting read
        every PF's count and copied the rows left for each set and view batch (a worker's fold of six views
        cut each set five times). Withdrawals open PFs again: they drop what was cut (:meth:`withdraw`)."""
        kept = state.opened.get(key)
        if kept is not None and kept[0]() is relation and kept[1] == full:
            return kept[2]
        opened = _open(relation, self.filled(state, key), full, shared)
        state.opened[key] = (weakref.ref(relation), full, opened)
        return opened

    def filled(self, state: AssociationCoverState, key: SetKey) -> np.ndarray[Any, Any]:
        """How many values each PF of the key's holder has in its set."""
        return self._held(state, key).counts

    def _held(self, state: AssociationCoverState, key: SetKey) -> HeldValues:
        """What each PF of the key's holder holds (built from the set when absent, extended as the
        holder's rows grow)."""
        height = state.seen.rows[key[0]].height
        held = state.held.get(key)
        if held is None:
            held = state.held[key] = HeldValues.of(state.sets.get(key), PF, key[3], self.cap(key[1], key[3]), height)
        else:
            held.extend(height)
        return held

    def recompute(self, seen: SeenRows) -> AssociationCoverState:
        """The state for rows already seen and encoded (e.g. another check's, restricted to this check's
        views): the capped sets computed in one pass, without encoding the rows again. Exact; the same
        work as one :meth:`update` with every row. ``seen`` is shared, not copied: do not update the result.
        """
        state = AssociationCoverState(seen=seen)
        active = self.released(seen)
        if not active.views:
            return state
        # The whole of one view as the "delta": its join with the others is everything.
        changed = active.views[0].name
        rows, positions = seen.present(changed), seen.present_positions(changed)
        assert rows is not None
        active._grow_by(state, changed, rows, positions, SharedWork(state.kept.caps))
        return state

    def released(self, seen: SeenRows) -> AssociationCoverCheck:
        """The check over the views that have rows present (``self`` when all have).

        A projection-only view with no rows would say that the table is empty, which any view with rows
        contradicts (no instance yields them: the definition holds vacuously for every set). On a stream
        it is a view whose rows have not arrived, or whose every row was withdrawn; read as not released,
        it constrains nothing and the views that have rows are checked as published (docs/design.md,
        "Empty views"). With every view empty, nothing is found either way.
        """
        active = tuple(view for view in self.views if seen.height(view.name))
        return self if len(active) == len(self.views) else replace(self, views=active)

    def merge(self, state: AssociationCoverState, other: AssociationCoverState) -> Delta[AssociationCoverFinding]:
        """Fold another partition's state in, exactly, by replaying its rows."""
        return self.update(state, other.seen.decoded())

    def minimal_cover_codes(self, state: AssociationCoverState) -> dict[CoverCodes, frozenset[str]]:
        """Every minimal association cover below k, in dictionary codes, with the views whose projection
        facts give it. No decoding: comparable across states that share dictionaries. Kept between batches
        (:mod:`.cover_index`): a batch costs the projection facts whose sets it grew. The mapping is the
        index's own, valid until the next update: read it, do not change it."""
        active = self.released(state.seen)
        givers = tuple((holder.name, e, s) for e, s in active.pairs for holder in active.views)
        index = state.index
        held = partial(self._held, state)
        if index is None or index.givers != givers or index.k != self.k:
            index = state.index = CoverIndex.build(state.sets, givers, self.k, PF, held)
        elif state.touched:
            reached: dict[tuple[str, str, str], list[pl.Series]] = {}
            for (holder, identifier, sensitive, _), found in state.touched.items():
                reached.setdefault((holder, identifier, sensitive), []).extend(found)
            index.refresh(
                state.sets,
                {giver: pl.concat(found).to_numpy() for giver, found in reached.items() if giver in givers},
                held,
            )
        state.touched = {}
        return index.minimal  # the index's own: read it, do not change it

    def result(
        self,
        state: AssociationCoverState,
        *,
        covers: Mapping[CoverCodes, frozenset[str]] | None = None,
        views: Mapping[CoverCodes, frozenset[str]] | None = None,
        since: Collection[CoverCodes] | None = None,
    ) -> list[AssociationCoverFinding]:
        """Every minimal association cover of size below k, sorted.

        ``covers``: :meth:`minimal_cover_codes` of ``state`` when the caller has it already. ``views``
        names, per cover, the views to report (a minimal forcing set); by default the views whose
        projection facts give the cover; kept as the last result's, so not changed after. ``since``: the
        covers whose views may differ from those of the last result, those it had and ``views`` has not
        included (with ``views``; None: any cover).
        """
        found = covers if covers is not None else self.minimal_cover_codes(state)
        chosen = views if views is not None else found
        # A finding reported before with the same views is the same object again (its id and text are
        # computed once), and only the covers whose views changed since the last result are looked at (a
        # batch changes few of thousands of covers).
        known, last = state.reported, state.reported_from
        items: Iterable[tuple[CoverCodes, frozenset[str]]] = chosen.items()
        shown: dict[tuple[CoverCodes, tuple[str, ...]], tuple[AssociationCoverFinding, Any]] = {}
        ordered: dict[frozenset[str], tuple[str, ...]] = {}  # few distinct sets of views: sorted once each
        removed: list[tuple[AssociationCoverFinding, Any]] = []
        added: list[tuple[AssociationCoverFinding, Any]] = []
        if last is not None:
            items, gone = _changed(chosen, last, since if views is not None else None)
            if not items and not gone and state.listed is not None:
                # The same views per cover: the caller's mapping is the last result's from now on (a search
                # resumes from the result it made, its own mapping compared by identity).
                state.reported_from = views if views is not None else last
                return state.listed
            shown = known  # changed in place: the covers gone or with other views leave it
            for cover, before in gone:
                names = ordered.get(before)
                if names is None:
                    names = ordered[before] = tuple(sorted(before))
                removed.append(shown.pop((cover, names)))
        minimal = []
        for cover, views_of in items:
            names = ordered.get(views_of)
            if names is None:
                names = ordered[views_of] = tuple(sorted(views_of))
            entry = known.get((cover, names))
            if entry is None:
                minimal.append((cover, names))
            else:
                shown[(cover, names)] = entry
                added.append(entry)
        # Decode in bulk, one gather per attribute: per-finding decoding dominated large results.
        wanted: dict[str, set[int]] = {}
        for (identifier, sensitive, code, sensitive_codes), _ in minimal:
            wanted.setdefault(identifier, set()).add(code)
            wanted.setdefault(sensitive, set()).update(sensitive_codes)
        decoded: dict[str, dict[int, Any]] = {
            attribute: dict(zip(sorted(codes), decode(state.seen.dictionaries, attribute, sorted(codes)), strict=True))
            for attribute, codes in wanted.items()
        }
        for cover, names in minimal:
            identifier, sensitive, code, sensitive_codes = cover
            finding = AssociationCoverFinding(
                k=self.k,
                identifier_attribute=identifier,
                identifier_value=decoded[identifier][code],
                sensitive_attribute=sensitive,
                sensitive_values=tuple(sorted((decoded[sensitive][c] for c in sensitive_codes), key=str)),
                views=names,
            )
            entry = shown[(cover, names)] = (finding, _order(finding))  # the sort key computed once per finding
            added.append(entry)
        # The index's mapping changes with the state: copied; the caller's views are kept as they are.
        state.reported, state.reported_from = shown, (views if views is not None else dict(found))
        # From the last list to this one (in sort order, as a diff gives them), when only those changed.
        state.listed_changes = (
            (state.listed, Delta(raised=_in_order(added), cleared=_in_order(removed))) if last is not None else None
        )
        if last is None or state.listed is None or (len(added) + len(removed)) * 8 > len(shown):
            entries = sorted(shown.values(), key=itemgetter(1))
            state.listed, state.listed_order = [f for f, _ in entries], [order for _, order in entries]
        else:
            state.listed, state.listed_order = _resorted(state.listed, state.listed_order, removed, added)
        return state.listed


def minimal_covers(covers: Mapping[tuple[K, frozenset[Any]], set[str]]) -> list[tuple[K, frozenset[Any], set[str]]]:
    """The covers no smaller cover of the same key (identifier value) contains, with their views.

    Linear in the covers plus, per key, quadratic in its few covers.
    """
    by_key: dict[K, list[frozenset[Any]]] = {}
    for key, cover in covers:
        by_key.setdefault(key, []).append(cover)
    return [
        (key, cover, views) for (key, cover), views in covers.items() if not any(other < cover for other in by_key[key])
    ]


def _changed(
    chosen: Mapping[CoverCodes, frozenset[str]],
    last: Mapping[CoverCodes, frozenset[str]],
    since: Collection[CoverCodes] | None,
) -> tuple[Iterable[tuple[CoverCodes, frozenset[str]]], Iterable[tuple[CoverCodes, frozenset[str]]]]:
    """The covers with their views in ``chosen`` and not in ``last``, and the reverse; looking only at the
    covers ``since`` when given (every cover whose views may differ, those gone from ``chosen`` included)."""
    if since is None:
        return chosen.items() - last.items(), last.items() - chosen.items()
    differ = [cover for cover in since if chosen.get(cover) != last.get(cover)]
    items = [(cover, chosen[cover]) for cover in differ if cover in chosen]
    gone = [(cover, last[cover]) for cover in differ if cover in last]
    return items, gone


def _in_order(entries: list[tuple[AssociationCoverFinding, Any]]) -> tuple[AssociationCoverFinding, ...]:
    return tuple(finding for finding, _ in sorted(entries, key=itemgetter(1)))


def _resorted(
    listed: list[AssociationCoverFinding],
    order: list[Any],
    removed: Iterable[tuple[AssociationCoverFinding, Any]],
    added: Iterable[tuple[AssociationCoverFinding, Any]],
) -> tuple[list[AssociationCoverFinding], list[Any]]:
    """A sorted list of findings (with their sort keys, ``order``) without ``removed`` and with ``added``:
    new lists (the last result's stays as it was), each finding found or placed by bisection."""
    listed, order = list(listed), list(order)
    for finding, key in removed:
        at = bisect_left(order, key)
        while listed[at] is not finding:  # equal keys: the finding itself
            at += 1
        del listed[at], order[at]
    for finding, key in added:
        at = bisect_right(order, key)
        listed.insert(at, finding)
        order.insert(at, key)
    return listed, order


def _order(finding: AssociationCoverFinding) -> tuple[str, str, str, tuple[str, ...]]:
    return (
        finding.identifier_attribute,
        finding.sensitive_attribute,
        str(finding.identifier_value),
        tuple(map(str, finding.sensitive_values)),
    )


def _grown_sets(current: pl.DataFrame, found: pl.DataFrame, target: str, cap: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``current`` capped sets (at most ``cap`` values of ``target`` per PF) with the pairs ``found`` added,
    and the pairs appended: only the PFs ``found`` holds are capped again, and only pairs not held yet are
    appended (a PF at its cap keeps its values: which ``cap`` stand for "cap or more" does not matter).
    O(found) joins against the sets, where capping the union anew grouped every set whole per batch."""
    if found.is_empty():
        return current, found
    if found.height * 8 > current.height:
        # Many pairs found: drop those held already (a hash of the sets), then cap per PF.
        fresh = found.join(current, on=[PF, target], how="anti")
        added = cap_grown(current, fresh, target, cap).slice(current.height)
    else:
        added = _added(current, found, target, cap)
    if added.is_empty():
        return current, added
    return appended(current, added), added


def _added(current: pl.DataFrame, found: pl.DataFrame, target: str, cap: int) -> pl.DataFrame:
    """The pairs of ``found`` that grow ``current``'s sets, for a few pairs found: one query over the sets of
    the PFs found (probing a hash of the batch's PFs, not of every set), then the pairs found; the first of
    equal pairs kept, ``cap`` per PF, and those that came from ``found``."""
    return in_memory(
        pl.concat(
            [
                current.lazy().join(found.lazy().select(PF), on=PF, how="semi").with_columns(pl.lit(False).alias(_NEW)),
                found.lazy().select(current.columns).with_columns(pl.lit(True).alias(_NEW)),
            ]
        )
        .unique(subset=[PF, target], keep="first", maintain_order=True)
        .group_by(PF, maintain_order=True)
        .head(cap)
        .filter(pl.col(_NEW))
        .drop(_NEW)
    )


def _share(state: AssociationCoverState, key: SetKey, twin: SetKey) -> None:
    """``key``'s set is ``twin``'s (grown already): take it, and what the batch touched of it."""
    if twin in state.sets:
        state.sets[key] = state.sets[twin]
    if twin in state.touched:
        state.touched[key] = state.touched[twin]
    # The same set holds the same values: one object for both, until the key is grown on its own.
    if twin in state.held:
        state.held[key] = state.held[twin]
        state.borrowed.add(key)
    else:
        state.held.pop(key, None)


def _open(relation: pl.DataFrame, filled: np.ndarray[Any, Any], cap: int, shared: SharedWork) -> pl.DataFrame:
    """The holder's relation without its saturated PFs (their sets are at the cap: a delta join cannot
    change them), shared in the batch by the runs that leave out the same PFs."""
    at = relation.get_column(PF).to_numpy()
    open_rows = filled[code_arrays.indices(at)] < cap
    if open_rows.all():
        return relation
    if code_arrays.codes_only(relation):
        # The rows taken from the relation's codes in numpy (kept with a kept relation, sharing its memory):
        # a polars filter of the holder's tens of thousands of rows took 0.3-0.6 ms per set and batch.
        return shared.subset(
            relation,
            f"open {cap}",
            open_rows,
            lambda: shared.codes(relation).take(np.flatnonzero(open_rows)).to_frame(),
        )
    return shared.subset(relation, f"open {cap}", open_rows, lambda: relation.filter(pl.Series(open_rows)))
