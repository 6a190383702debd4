"""The linkage check's section of a report: its findings by channel, certain before possible."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from streamdetect.checks.findings import LinkageFinding
from streamdetect.checks.presentation import Section, Shown, association_cells, values_text
from streamdetect.checks.protocol import CheckSummary


def section(summary: CheckSummary, findings: Sequence[LinkageFinding], shown: Shown) -> Section:
    """One block per (certain or possible, channel), smallest channels first."""
    heading = (
        f"linkage (k = {summary.k}): {summary.channels} channels, "
        f"{summary.tasks} (channel, identifier, sensitive) combinations examined"
    )
    groups: dict[tuple[bool, tuple[str, ...]], list[LinkageFinding]] = defaultdict(list)
    for finding in findings:
        groups[(not finding.certain, finding.views)].append(finding)
    blocks = []
    columns = ("#", "id", "identifier", "value", "sensitive", "linked values", "disclosure", "other channels")
    for possible, views in sorted(groups, key=lambda g: (g[0], len(g[1]), g[1])):
        members = groups[(possible, views)]
        joined = ", ".join(members[0].joined_on) or "nothing (one view)"
        kind = "possible links" if possible else "certain"
        title = (
            f"{kind}: channel {{{', '.join(views)}}}, level {len(views)}, joined on {joined}: {len(members)} finding(s)"
        )
        rows = [
            (
                *association_cells(f, shown),
                values_text(f.sensitive_values),
                ("possible" if not f.certain else ("total" if f.total else "partial"))
                + ("" if f.searched_below is None else f"; none below level {f.searched_below}, not all searched"),
                str(len(f.channels) - 1) if len(f.channels) > 1 else "",
            )
            for f in members
        ]
        blocks.append(shown.block(title, columns, rows, warning=possible))
    return Section(heading, tuple(blocks))
