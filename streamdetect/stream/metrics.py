"""The worker's Prometheus metrics (prometheus-client), served on /metrics at a host and port of its own.

Names and units follow Prometheus' conventions (``_total`` counters, ``_seconds``, ``_bytes``). Labels are
names the topology gives (views, checks), the dead-letter reasons of :data:`~streamdetect.stream.records.REASONS`
and levels: never a value of the data.
"""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import urllib.request
from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.parser import text_string_to_metric_families

from streamdetect.stream.records import Publication
from streamdetect.stream.sensor import WorkerSensor
from streamdetect.stream.service import Outcome

#: Detection latency buckets (seconds): a stream detector answers within a second; the tail shows backlog.
#: Finer around the second (0.75, 0.9, 1.25, 1.5, 2), where a target of "p99 under 1 s" is decided, and
#: every half second up to 4 s, where a worker behind its feed sits: a quantile read from the buckets is
#: interpolated within one, and a bucket from 2.5 to 5 s read a backlog of 3 s as 4.9.
LATENCY_BUCKETS: tuple[float, ...] = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 1.25, 1.5, 2.0, 2.5)
LATENCY_BUCKETS += (3.0, 3.5, 4.0, 5.0, 7.5, 10.0, 30.0, 60.0, 300.0)
#: Fold time buckets (seconds): prometheus' defaults (to 10 s) with the same half seconds from 1 to 4 s.
BATCH_BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5)
BATCH_BUCKETS += (3.0, 3.5, 4.0, 5.0, 7.5, 10.0)


class WorkerMetrics(WorkerSensor):
    """Counters, gauges and histograms of one worker, in a registry of their own: its sensor."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.records = Counter("streamdetect_records_consumed", "Records read from view topics.", ["view"], registry=r)
        self.rows = Counter(
            "streamdetect_rows_consumed",
            "View rows folded in, by view and op (add, retract).",
            ["view", "op"],
            registry=r,
        )
        self.replayed = Counter(
            "streamdetect_records_replayed",
            "Records skipped as already folded in (same batch id).",
            ["view"],
            registry=r,
        )
        self.dead_letters = Counter(
            "streamdetect_dead_letters", "Records sent to the dead-letter topic, by reason.", ["reason"], registry=r
        )
        self.raised = Counter("streamdetect_findings_raised", "Findings raised.", ["check"], registry=r)
        self.cleared = Counter("streamdetect_findings_cleared", "Findings cleared.", ["check"], registry=r)
        self.open = Gauge(
            "streamdetect_open_findings",
            "Findings open now, by check, level and certainty.",
            ["check", "level", "certain"],
            registry=r,
        )
        self.batch_seconds = Histogram(
            "streamdetect_batch_processing_seconds",
            "Time to fold one record, or the records taken together, into the detector.",
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        self.check_seconds = Counter(
            "streamdetect_check_seconds",
            "Seconds spent folding records into each check's state (its update and its findings).",
            ["check"],
            registry=r,
        )
        self.latency = Histogram(
            "streamdetect_detection_latency_seconds",
            "From the publication time of the record that raised a finding to its event on the findings topic.",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.state_bytes = Counter(
            "streamdetect_state_written_bytes", "Bytes of state pieces written to the state table.", registry=r
        )
        self.compactions = Counter(
            "streamdetect_state_compactions",
            "Snapshots that replaced the state entries written before them (the changelog's compaction).",
            registry=r,
        )
        self.state_size = Gauge(
            "streamdetect_state_bytes",
            "Size of the worker's state in its table: what it restored plus what it wrote since.",
            registry=r,
        )
        self.consumer_lag = Gauge(
            "streamdetect_consumer_lag",
            "Records of a view topic's partition not yet read, as of the last record read from it.",
            ["topic", "partition"],
            registry=r,
        )
        self.tasks = Gauge(
            "streamdetect_tasks",
            "What each check examines: channels of the closure and tasks.",
            ["check", "kind"],
            registry=r,
        )
        self.missing = Gauge(
            "streamdetect_inputs_missing",
            "1 while a check cannot see an input it needs (the private table: no row of it has arrived), else 0.",
            ["input", "check"],
            registry=r,
        )
        self.misconfigured = Gauge(
            "streamdetect_topic_misconfigured",
            "1 for an output topic found with another setting than streamdetect creates it with (a findings topic "
            "that deletes by retention forgets open findings), by topic kind and setting.",
            ["topic", "setting"],
            registry=r,
        )
        self._open: dict[str, tuple[str, str, str]] = {}
        self._readers: list[str] = []

    def examined(self, summaries: Iterable[Any], table_readers: Iterable[str] = ()) -> None:
        """Set the tasks gauge from the Detector's check summaries (channels and tasks per check), and the
        inputs-missing gauge of the checks that read the table to 1 until the state says otherwise
        (:meth:`inputs`): a worker that has not seen the table does not know it."""
        self._readers = list(table_readers)
        for check in self._readers:
            self.missing.labels("table", check).set(1)
        for summary in summaries:
            self.tasks.labels(summary.name, "channels").set(summary.channels)
            self.tasks.labels(summary.name, "tasks").set(summary.tasks)
            # Series exist from the start at 0 (Prometheus' advice for known labels): a rate over them is
            # 0, not absent, until the first finding is raised or cleared.
            self.raised.labels(summary.name)
            self.cleared.labels(summary.name)

    def topics(self, problems: Iterable[tuple[str, str]], settings: Mapping[str, Iterable[str]]) -> None:
        """The misconfigured gauge: per topic kind (findings, dead-letters) and each setting streamdetect gives
        it (``settings``), 1 when found wrong at the start (``problems``: (kind, setting)), else 0."""
        wrong = set(problems)
        for kind, named in settings.items():
            for setting in named:
                self.misconfigured.labels(kind, setting).set(1 if (kind, setting) in wrong else 0)

    def inputs(self, incomplete: Iterable[str], reporting: Iterable[str] | None = None) -> None:
        """The checks that cannot see the table now (:meth:`Detector.incomplete`): their gauge 1, the
        other readers' 0; only those of ``reporting`` when given (a partition unit reports its own checks,
        not the ones another unit runs)."""
        missing = set(incomplete)
        reported = None if reporting is None else set(reporting)
        for check in self._readers:
            if reported is None or check in reported:
                self.missing.labels("table", check).set(1 if check in missing else 0)

    def status(self, outcome: Outcome) -> None:
        """The inputs-missing gauge from an outcome that reports a change of status (any outcome)."""
        if outcome.incomplete is not None:
            self.inputs(outcome.incomplete, outcome.reporting or None)

    def record(self, outcome: Outcome, seconds: float) -> None:
        """Count what one record led to (:class:`~streamdetect.stream.service.Outcome`), read and folded
        in one place (a worker without a route stage)."""
        if outcome.dead is None:
            assert outcome.publication is not None
            self.consumed(outcome.publication)
        self.folded(outcome, seconds)

    def consumed(self, publication: Publication) -> None:
        """Count a record read from a view topic."""
        self.records.labels(publication.label).inc()
        self.rows.labels(publication.label, publication.op).inc(publication.rows.height)

    def folded(self, outcome: Outcome, seconds: float) -> None:
        """Count what folding a record (a unit's share of it, with a route stage) led to."""
        self.status(outcome)
        if outcome.dead is not None:
            self.dead_letters.labels(outcome.dead.reason).inc()
            return
        publication = outcome.publication
        assert publication is not None
        if outcome.replayed:
            self.replayed.labels(publication.label).inc()
            return
        if outcome.merged:  # folded with a later record of its run, which counts the run's effects
            return
        self.batch_seconds.observe(seconds)
        for check, spent in outcome.check_seconds.items():
            self.check_seconds.labels(check).inc(spent)
        self.stored(outcome)
        # Latency runs from the earliest record folded in with this one (an upper bound when several were).
        self.findings(outcome.raised, outcome.cleared, outcome.earliest or publication.published)

    def stored(self, outcome: Outcome) -> None:
        """Count the state entries an outcome wrote, and the snapshot among them (a record's, or one taken
        apart from any record, in a worker's idle time)."""
        self.state_bytes.inc(outcome.written_bytes)
        if outcome.deletes:
            self.compactions.inc()

    def findings(self, raised: Iterable[Any], cleared: Iterable[Any], published: dt.datetime) -> None:
        """Count a batch's raised and cleared findings, keep the open ones' gauge, observe the latency."""
        # Counted per label set, one metric call each (a fold raises and clears thousands of findings, and
        # each call takes the metric's lock).
        latency = max((dt.datetime.now(dt.UTC) - published).total_seconds(), 0.0)
        counted: collections.Counter[str] = collections.Counter()
        opened: collections.Counter[tuple[str, str, str]] = collections.Counter()
        for finding in cleared:
            counted[finding.check] += 1
            labels = self._open.pop(finding.id, None)
            if labels is not None:
                opened[labels] -= 1
        for check, count in counted.items():
            self.cleared.labels(check).inc(count)
        counted.clear()
        taken = 0
        for finding in raised:
            counted[finding.check] += 1
            taken += 1
            if finding.id not in self._open:
                labels = self._open[finding.id] = _labels(finding)
                opened[labels] += 1
        for check, count in counted.items():
            self.raised.labels(check).inc(count)
        for labels, change in opened.items():
            if change:
                self.open.labels(*labels).inc(change)
        for _ in range(taken):  # a histogram has no bulk observation
            self.latency.observe(latency)

    def reopened(self, findings: Iterable[Any]) -> None:
        """Count in the open gauge the findings a state restored from the table holds open: raised before
        it was written (by this worker or one before it), so neither raised again nor timed."""
        for finding in findings:
            if finding.id not in self._open:
                labels = self._open[finding.id] = _labels(finding)
                self.open.labels(*labels).inc()

    def reset_open(self, findings: Iterable[Any]) -> None:
        """The open gauge for exactly ``findings``: the states this worker still holds, after some went to
        another worker (a rebalance), which counts them from their restore."""
        for labels in self._open.values():
            self.open.labels(*labels).dec()
        self._open = {}
        self.reopened(findings)

    def state(self, size: int) -> None:
        """The state-size gauge."""
        self.state_size.set(size)

    def lag(self, topic: str, partition: int, left: int) -> None:
        """The consumer-lag gauge of a partition."""
        self.consumer_lag.labels(topic, str(partition)).set(max(left, 0))

    def lag_gone(self, topic: str, partition: int) -> None:
        """Drop a partition's lag series (another worker reports it now)."""
        with contextlib.suppress(KeyError):
            self.consumer_lag.remove(topic, str(partition))

    def serve(self, port: int, host: str = "127.0.0.1") -> None:
        """Serve /metrics on host:port (a thread of its own)."""
        start_http_server(port, addr=host, registry=self.registry)


def fetch(port: int, host: str = "127.0.0.1") -> str:
    """A worker's /metrics page, as text."""
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as page:
        return str(page.read().decode())


def scrape(port: int, host: str = "127.0.0.1") -> dict[str, float]:
    """A worker's /metrics page as samples (:func:`samples`)."""
    return samples(fetch(port, host))


def samples(text: str) -> dict[str, float]:
    """A metrics page's samples: ``name{label="value",...}`` (labels sorted) -> value."""
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{key}="{value}"' for key, value in sorted(sample.labels.items()))
            found[f"{sample.name}{{{labels}}}" if labels else sample.name] = float(sample.value)
    return found


def _labels(finding: Any) -> tuple[str, str, str]:
    """A finding's labels in the open gauge: check, level, certainty (no identifier or value)."""
    return (finding.check, finding.level_label, "true" if finding.certain else "false")
