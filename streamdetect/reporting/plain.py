"""The human report as plain text: for pipes, files and CI logs (no colour, no box drawing, no wrapping).

Columns are padded to their widest cell and lines are as long as they need to be, so ``grep`` and
``less -S`` work on them and no header is folded over several lines.
"""

from __future__ import annotations

from streamdetect.reporting.document import Block, Layout


def block_lines(block: Block) -> list[str]:
    """A block as aligned text lines: title, header, rule, rows, and how many rows were left out."""
    widths = [len(column) for column in block.columns]
    for row in block.rows:
        widths = [max(width, len(cell)) for width, cell in zip(widths, row, strict=True)]
    lines = [block.title]
    if block.columns:
        lines.append(
            "  ".join(column.ljust(width) for column, width in zip(block.columns, widths, strict=True)).rstrip()
        )
        lines.append("  ".join("-" * width for width in widths))
    lines.extend(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in block.rows
    )
    if block.omitted:
        lines.append(f"... and {block.omitted} more (--limit, or --format json for all)")
    return lines


def plain_text(document: Layout) -> str:
    """The whole report as plain text, ending with the verdict line."""
    lines: list[str] = []
    for section in document.sections:
        lines.append(section.heading)
        for block in section.blocks:
            lines.append("")
            lines.extend(block_lines(block))
        lines.append("")
    if any(section.blocks for section in document.sections):
        lines.extend([document.legend, ""])
    if document.withhold is not None:
        lines.extend([*block_lines(document.withhold), ""])
    lines.append(document.summary)
    return "\n".join(lines) + "\n"
