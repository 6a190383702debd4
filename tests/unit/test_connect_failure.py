"""How a failed Debezium connector is bounded and told: the retry budget written into its configuration,
the reason taken from Connect's status, and what `capture` says when it stops on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamdetect.stream import capture, connect
from streamdetect.stream.broker import BrokerError

TRACE = "\n".join(
    [
        "org.apache.kafka.connect.errors.ConnectException: An exception occurred in the change event producer. "
        "This connector will be stopped.",
        "\tat io.debezium.pipeline.ErrorHandler.setProducerThrowable(ErrorHandler.java:67)",
        "Caused by: org.apache.kafka.connect.errors.RetriableException: An exception occurred in the change event "
        "producer. This connector will be restarted.",
        "\t... 10 more",
        'Caused by: org.postgresql.util.PSQLException: ERROR: invalid byte sequence for encoding "UTF8": 0xe9',
        '  Where: slot "streamdetect_t", output plugin "pgoutput", in the change callback, associated LSN 0/1D43B98',
        "\tat org.postgresql.core.v3.QueryExecutorImpl.receiveErrorResponse(QueryExecutorImpl.java:2904)",
        "\t... 10 more",
    ]
)


def _settings(retry_for_s: float) -> dict[str, str]:
    text = connect._connector("c", "postgresql://u@h:5/db", "p", "public.t", "s", retry_for_s=retry_for_s)
    pairs = (line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))
    return dict(pairs)


@pytest.mark.parametrize(
    ("retry_for_s", "retries", "wait_ms"), [(300.0, "30", "10000"), (2.0, "1", "2000"), (25.0, "3", "10000")]
)
def test_the_retry_budget_is_written_as_debeziums_retries_and_wait(
    retry_for_s: float, retries: str, wait_ms: str
) -> None:
    settings = _settings(retry_for_s)
    assert settings["errors.max.retries"] == retries  # never -1 (Debezium's default: without end)
    assert settings["retriable.restart.connector.wait.ms"] == wait_ms


def test_a_failure_is_told_by_its_first_line_and_its_root_cause() -> None:
    status = {"connector": {"state": "RUNNING"}, "tasks": [{"id": 0, "state": "FAILED", "trace": TRACE}]}
    assert connect._state(status) == "FAILED"
    said = connect._failure(status)
    assert said.startswith("org.apache.kafka.connect.errors.ConnectException: An exception occurred")
    assert 'Caused by: org.postgresql.util.PSQLException: ERROR: invalid byte sequence for encoding "UTF8"' in said
    assert 'Where: slot "streamdetect_t"' in said
    assert "RetriableException" not in said  # the root cause only, not every wrapper
    assert "ErrorHandler.java" not in said
    assert "QueryExecutorImpl" not in said
    assert connect._failure({"tasks": [{"state": "FAILED"}]}) == "(no trace)"
    # A root cause followed by the elided frames and no server line: the cause alone.
    elided = "ConnectException: stopped\nCaused by: java.io.EOFException: gone\n\t... 3 more"
    assert connect._failure({"tasks": [{"state": "FAILED", "trace": elided}]}) == (
        "ConnectException: stopped Caused by: java.io.EOFException: gone"
    )


def test_the_capture_stops_on_a_failed_connector_and_says_what_to_do() -> None:
    capture._stop_on(None)  # running, or not watched: nothing to say
    with pytest.raises(BrokerError, match=r"connect start` then restarts"):
        capture._stop_on("ConnectException: the database is gone")
    with pytest.raises(BrokerError, match=r"stays in the write-ahead log.*--forget"):
        capture._stop_on('PSQLException: ERROR: invalid byte sequence for encoding "UTF8": 0xe9')


def _statuses(monkeypatch: pytest.MonkeyPatch, states: list[str]) -> list[str]:
    """Connect's status answers the task states ``states`` one poll after another (the last one then on),
    with no wait between polls; the states left to answer."""
    left = list(states)

    def status(port: int, name: str) -> dict[str, object]:
        state = left.pop(0) if len(left) > 1 else left[0]
        return {"connector": {"state": "RUNNING"}, "tasks": [{"id": 0, "state": state, "trace": TRACE}]}

    monkeypatch.setattr(connect, "_status", status)
    monkeypatch.setattr(connect.time, "sleep", lambda seconds: None)
    return left


def _connect(tmp_path: Path) -> connect.Connect:
    return connect.Connect(8083, 1, tmp_path, "changes")


def test_a_restarted_connector_that_fails_again_is_told_at_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The failure before the restart, the restart begun, then a new failure: said at once, not as a timeout.
    _statuses(monkeypatch, ["FAILED", "RESTARTING", "FAILED"])
    with pytest.raises(BrokerError, match=r"failed again after its restart: .*invalid byte sequence"):
        connect._await_running(_connect(tmp_path), "c", 60.0, restarted=True, grace_s=60.0)


def test_a_restarted_connector_may_show_its_old_failure_before_it_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    left = _statuses(monkeypatch, ["FAILED", "FAILED", "RESTARTING", "RUNNING"])
    connect._await_running(_connect(tmp_path), "c", 60.0, restarted=True, grace_s=60.0)
    assert left == ["RUNNING"]
    # Without a restart, FAILED is a failure at the first poll.
    _statuses(monkeypatch, ["FAILED", "RUNNING"])
    with pytest.raises(BrokerError, match=r"^Debezium's connector failed: "):
        connect._await_running(_connect(tmp_path), "c", 60.0)


def test_a_restart_that_never_begins_is_a_failure_after_the_grace(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _statuses(monkeypatch, ["FAILED"])
    with pytest.raises(BrokerError, match=r"failed again after its restart"):
        connect._await_running(_connect(tmp_path), "c", 60.0, restarted=True, grace_s=0.0)
