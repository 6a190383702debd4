"""Which k-anonymity method a topology calls for (Yao, Wang & Jajodia 2005), as one check object.

- no effective FD, projection-only: the exact join-based association covers, incremental
  (:mod:`streamdetect.checks.association_covers`);
- no effective FD, selections: the exact cell procedure of Figure 5 (:mod:`.selection_covers`);
- the identifier is the key with one join path to P (6.3.1): exact (:mod:`.key_covers`);
- other effective FDs: the conservative complete-signature check of section 7, against the private
  table (:mod:`.conservative_covers`);
- the identifier is the key, two views with one selection (6.3.2): exact by matchings (:mod:`.key_matching`);
- other selections together with an effective FD: the conservative check with swap signatures.

The last three are recomputed per batch behind the same interface (:mod:`.recomputed`).
"""

from __future__ import annotations

from streamdetect.checks.association_covers import AssociationCoverCheck
from streamdetect.checks.conservative_covers import ConservativeCoverCheck
from streamdetect.checks.findings import AssociationCoverFinding
from streamdetect.checks.functional_dependencies import effective_dependencies
from streamdetect.checks.key_covers import KeyPathCoverCheck, key_path
from streamdetect.checks.key_matching import KeyMatchingCoverCheck, matching_subcase
from streamdetect.checks.recomputed import RecomputedCheck
from streamdetect.checks.selection_covers import SelectionCoverCheck
from streamdetect.model.topology import Topology

KAnonymityCheck = AssociationCoverCheck | RecomputedCheck[AssociationCoverFinding]


def k_anonymity_check(topology: Topology, k: int | None = None) -> KAnonymityCheck:
    """The k-anonymity check for the topology's subcase; ``k`` overrides the configured threshold."""
    schema = topology.table
    config = topology.check_config("k-anonymity")
    threshold = k if k is not None else (config.k if config is not None else 2)
    effective = effective_dependencies(topology.views, schema.functional_dependencies)
    selections = [view.name for view in topology.views if view.where is not None]
    names = tuple(view.name for view in topology.views)
    if effective and selections:
        pairs = [(e, p) for e in schema.identifiers for p in schema.sensitive]
        cases = {
            pair: matching_subcase(topology.views, schema.functional_dependencies, schema.attributes, *pair)
            for pair in pairs
        }
        case = cases[pairs[0]] if len(pairs) == 1 else None
        if case is not None:
            matching = KeyMatchingCoverCheck(case[0], case[1], pairs[0][0], pairs[0][1], threshold)
            return RecomputedCheck(matching.run, names)
    if selections and not effective:
        cells = SelectionCoverCheck(topology.views, schema.identifiers, schema.sensitive, threshold)
        return RecomputedCheck(cells.run, names)
    if not effective:
        return AssociationCoverCheck.from_topology(topology, k=threshold)
    paths = {
        (e, p): key_path(topology.views, schema.functional_dependencies, schema.attributes, e, p)
        for e in schema.identifiers
        for p in schema.sensitive
    }
    if not selections and all(path is not None for path in paths.values()):
        known = {pair: path for pair, path in paths.items() if path is not None}
        return RecomputedCheck(KeyPathCoverCheck(topology.views, known, threshold).run, names)
    conservative = ConservativeCoverCheck(
        topology.views, schema.identifiers, schema.sensitive, tuple(effective), threshold
    )
    return RecomputedCheck(conservative.run, names, needs_table=True)


def needs_table(topology: Topology) -> bool:
    """Whether the k-anonymity check reads the private table: only the conservative method does."""
    check = k_anonymity_check(topology)
    return isinstance(check, RecomputedCheck) and check.needs_table
