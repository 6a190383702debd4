"""Baselines: the findings of an accepted earlier report, which do not fail later runs (as linters
onboard existing debt). A finding is matched by its stable ``id``, a hash of everything it says."""

from __future__ import annotations

import json
from pathlib import Path

from streamdetect.errors import TopologyError


def accepted_ids(path: Path) -> frozenset[str]:
    """The ids of the findings in a ``streamdetect check --format json`` report.

    Raises :class:`TopologyError` naming the file when it is missing or not such a report.
    """
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TopologyError("no such file (given as --baseline)", file=str(path)) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TopologyError(f"not a JSON report (--baseline): {exc}", file=str(path)) from None
    findings = document.get("findings") if isinstance(document, dict) else None
    if not isinstance(findings, list) or not all(
        isinstance(f, dict) and isinstance(f.get("id"), str) for f in findings
    ):
        raise TopologyError(
            "not a streamdetect report (--baseline): expected an object whose 'findings' each have an 'id'",
            file=str(path),
        )
    assert isinstance(findings, list)
    return frozenset(f["id"] for f in findings)
