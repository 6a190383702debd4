"""The human report as Markdown: a merge-request or pull-request comment (GitHub-flavoured tables)."""

from __future__ import annotations

from streamdetect.reporting.document import Block, Layout


def _cell(text: str) -> str:
    # A pipe would end the cell and a newline the row.
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _table(block: Block) -> list[str]:
    lines = [f"**{_cell(block.title)}**", ""]
    lines.append("| " + " | ".join(_cell(c) for c in block.columns) + " |")
    lines.append("|" + "|".join(" --- " for _ in block.columns) + "|")
    lines.extend("| " + " | ".join(_cell(c) for c in row) + " |" for row in block.rows)
    if block.omitted:
        lines.extend(["", f"… and {block.omitted} more (the JSON report has them all)."])
    return [*lines, ""]


def markdown(document: Layout) -> str:
    """The whole report: a heading with the verdict, one section per check, the legend, what to withhold."""
    verdict = "fails" if document.failed else "passes"
    lines = [f"## streamdetect: `{document.topology}` {verdict}", "", document.summary, ""]
    for section in document.sections:
        lines.extend([f"### {section.heading}", ""])
        for block in section.blocks:
            lines.extend(_table(block))
    if any(section.blocks for section in document.sections):
        lines.extend([f"_{document.legend}_", ""])
    if document.withhold is not None:
        lines.extend(["### What to withhold", "", *_table(document.withhold)])
    return "\n".join(lines)
