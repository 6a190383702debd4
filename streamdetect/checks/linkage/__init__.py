"""The linkage check: Dou & Coulondre's continuous count-equals-one query, exact and incremental.

Dou & Coulondre 2012 (section 3.4, Fig. 2) run, over the merged stream of every joined view of the
leveled closure, a CEL query that counts per identifier. As printed it never groups by the identifier;
its meaning, implemented here, is: in a channel's joined view, an identifier value E = e linked to
fewer than k distinct values of a sensitive attribute S is disclosed (k = 2: exactly one value, a total
disclosure; larger k: partial). Each disclosed (E, e, S) is reported once, with its minimal channel:
the smallest level where it is disclosed.

State (explicit, serializable, versioned): the distinct rows seen per view, and per (channel, E, S)
the capped linked sets L(e) (at most k values per e). An update takes new rows of one or more views
and applies the delta rule of a join with only arrivals: with every view's new rows stored first, the
join grows by exactly the union of the joins of the new rows of each view v with the rows present of
the others, so L(e) grows by :func:`~streamdetect.relational.linked_values.linked_values` over those
deltas (a join of two deltas is found twice and kept once: the sets are sets). A set that reaches k
stays saturated; the finding is cleared. ``check`` is one update with every row.

Per batch the work follows the batch (docs/design.md, "Delta-proportional linkage updates"): a delta
enters a task as the projected rows its view did not show before; saturated identifier values are left
out of the joins (a mask per task); merges and finding diffs read the sets below k only; elimination
orders are recorded once per (task, view, delta size) and replayed. Those are caches beside the state,
rebuilt after a restore or a withdrawal; the state itself is only the rows and the capped sets.

Only the minimal channel of a disclosure is reported, so a task keeps exact sets only for its *live*
identifier values, those saturated in every sub-channel with no selection to prove (a value disclosed
or absent below can never be reported higher up); a stored set is always a subset of the true one, and
equal to it while the value is live. Values becoming live are caught up whole, and values a step
saturates are settled from the top down (:meth:`LinkageCheck._inherit`). docs/design.md gives the proof.

Null is not a value: a row with a null in an attribute a channel uses drops out of that channel.
"""

from streamdetect.checks.linkage.adapter import Linkage
from streamdetect.checks.linkage.check import LinkageCheck
from streamdetect.checks.linkage.results import finding_order
from streamdetect.checks.linkage.state import LinkageState
from streamdetect.checks.linkage.tasks import LinkageTask

__all__ = ["Linkage", "LinkageCheck", "LinkageState", "LinkageTask", "finding_order"]
