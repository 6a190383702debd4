"""The findings topic's wire format: a finding's raised and cleared events keyed by its id, the status
events of incomplete checks, and the open set folded back from them (``streamdetect findings``)."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from streamdetect.stream.records import (
    FINDINGS_MAX_BYTES,
    Publication,
)

log = logging.getLogger(__name__)

#: The key prefix of status events on the findings topic (``incomplete/<check>``): the last event under a
#: key says whether that check sees every input it needs.
STATUS_PREFIX = "incomplete/"


def status_events(incomplete: Mapping[str, str], readers: Sequence[str]) -> list[tuple[bytes, bytes]]:
    """Findings-topic records saying which checks are blind to an input: ``{"event": "incomplete",
    "check", "input": "table", "reason"}`` for each check of ``incomplete``, ``{"event": "complete",
    "check", "input": "table"}`` for the other ``readers`` (the checks that read the table), each keyed
    ``incomplete/<check>``. A consumer keeps the last event per check (:func:`fold_events`)."""
    records = []
    for check in readers:
        if check in incomplete:
            body = {"event": "incomplete", "check": check, "input": "table", "reason": incomplete[check]}
        else:
            body = {"event": "complete", "check": check, "input": "table"}
        records.append(((STATUS_PREFIX + check).encode(), json.dumps(body, separators=(",", ":")).encode()))
    return records


def finding_event(
    finding: Any, event: str, publication: Publication, batches: Sequence[str] | None = None
) -> tuple[bytes, bytes]:
    """A findings-topic record: keyed by the finding's stable id; the report-format body, whether it was
    raised or cleared, and the publication (time, batch, view) of the record that raised or cleared it
    (with several records folded together, the last of them; ``batches`` lists them all)."""
    return finding_events([finding], event, publication, batches)[0]


def finding_events(
    findings: Sequence[Any], event: str, publication: Publication, batches: Sequence[str] | None = None
) -> list[tuple[bytes, bytes]]:
    """:func:`finding_event` of each finding. The text around the finding's id and body is the same for
    every finding of a check in one update: serialised once per check (an update raises and clears up to a
    thousand findings), and each finding's own JSON text, the canonical text its id hashed, spliced in."""
    opening = '{"event":' + json.dumps(event) + ',"id":'
    closing = "}" if not batches else ',"batches":' + json.dumps(list(batches), separators=(",", ":")) + "}"
    middles: dict[str, str] = {}
    records = []
    for finding in findings:
        middle = middles.get(finding.check)
        if middle is None:
            head = {
                "check": finding.check,
                "published": publication.published.isoformat(),
                "batch": publication.batch_id,
                "view": publication.view,
            }
            middle = middles[finding.check] = "," + json.dumps(head, separators=(",", ":"), default=str)[1:-1]
        body = _event_body(finding)
        text = opening + json.dumps(finding.id) + middle + ',"finding":' + body + closing
        records.append((finding.id.encode(), text.encode()))
    return records


def cleared_again(cleared: Sequence[tuple[str, str]], publication: Publication) -> list[tuple[bytes, bytes | None]]:
    """The cleared events of findings (check, id) sent again after a restore, each with its tombstone: the
    shape of :func:`finding_events`' but ``"finding": null, "resent": true`` (the state that sends them
    no longer holds the findings). A consumer folds them as any cleared event (:func:`fold_events`)."""
    records: list[tuple[bytes, bytes | None]] = []
    for check, finding_id in cleared:
        head = {"check": check, "published": publication.published.isoformat(), "batch": publication.batch_id}
        body = {"event": "cleared", "id": finding_id, **head, "view": publication.view, "finding": None}
        text = json.dumps({**body, "resent": True}, separators=(",", ":"), default=str)
        records += [(finding_id.encode(), text.encode()), (finding_id.encode(), None)]
    return records


#: The members a finding event lists of a class (SIND, RSIND): a class of tens of thousands of public
#: tuples changes with every batch of the table, and its whole list in each raised and cleared event
#: would ship megabytes per batch. The event says how many there are; ``check`` and ``explain`` list them.
EVENT_MEMBERS = 100
#: The largest finding body an event carries: the findings topic's record limit, less room for the event's
#: other fields.
_EVENT_BODY_BYTES = FINDINGS_MAX_BYTES - (64 << 10)


def _event_body(finding: Any) -> str:
    """The finding's JSON text as its events carry it: whole, or, for a class of more than
    :data:`EVENT_MEMBERS` members (or a body over the topic's limit), with the first members only and
    ``"truncated": {"members": <how many it has>}``; the id is the whole finding's either way (``findings``
    keeps it, and says the list was cut)."""
    members = finding.listed_members
    if len(members) <= EVENT_MEMBERS and len(finding.json_text) <= _EVENT_BODY_BYTES:
        return str(finding.json_text)
    if len(members) > EVENT_MEMBERS:  # the document of the first members only (not of them all, then cut)
        short = dataclasses.replace(finding, members=members[:EVENT_MEMBERS], members_text=None)
        document = {**short.json_form, "id": finding.id}
    else:
        document = dict(finding.json_form)
    listed = list(document.get("members", []))
    document["truncated"] = {"members": len(members)}
    keep = min(len(listed), EVENT_MEMBERS)
    while True:
        document["members"] = listed[:keep]
        text = json.dumps(document, separators=(",", ":"), default=str)
        if len(text) <= _EVENT_BODY_BYTES or not keep:
            break
        keep //= 2
    if len(text) > _EVENT_BODY_BYTES:
        log.error("finding %s (%s) does not fit the findings topic even without its members", finding.id, finding.check)
    return text


def open_findings(events: Sequence[bytes | None]) -> dict[str, dict[str, Any]]:
    """The open findings after a sequence of findings-topic values, in order: by id, the report-format
    body of every finding raised and not cleared since. A replayed event changes nothing (an id raised
    twice is one open finding; a cleared id stays cleared until raised again)."""
    return fold_events(events)[0]


def fold_events(events: Sequence[bytes | None]) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """The open findings (:func:`open_findings`) and the checks incomplete after a sequence of
    findings-topic values, in order: per check, the reason of its last status event when that says
    ``incomplete`` (:func:`status_events`). A tombstone (None) follows the ``cleared`` event of its
    finding, or is all compaction left of it: nothing to do. Raises ``ValueError`` (or ``KeyError``) on a
    value that is not an event."""
    opened: dict[str, dict[str, Any]] = {}
    incomplete: dict[str, str] = {}
    for value in events:
        if value is None:
            continue
        event = json.loads(value)
        kind = event["event"]
        if kind == "raised":
            opened[event["id"]] = event["finding"]
        elif kind == "cleared":
            opened.pop(event["id"], None)
        elif kind == "incomplete":
            incomplete[event["check"]] = event["reason"]
        elif kind == "complete":
            incomplete.pop(event["check"], None)
        else:
            raise ValueError(f"unknown event {kind!r}")
    return opened, incomplete
