"""Kafka security settings from the environment, against the real broker's SASL listener: the
publisher, the worker (Faust, aiokafka) and the findings reader all log in; a refused login is one line
and exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import streamdetect
from streamdetect.io.topology_file import load_topology
from tests.integration.conftest import SASL_PASSWORD, SASL_USER
from tests.integration.kafka_helpers import Worker, table1_topology, until


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streamdetect", *args], capture_output=True, text=True, timeout=120, check=False
    )


def _login(monkeypatch: pytest.MonkeyPatch, mechanism: str, password: str = SASL_PASSWORD) -> None:
    monkeypatch.setenv("STREAMDETECT_KAFKA_SECURITY_PROTOCOL", "SASL_PLAINTEXT")
    monkeypatch.setenv("STREAMDETECT_KAFKA_SASL_MECHANISM", mechanism)
    monkeypatch.setenv("STREAMDETECT_KAFKA_SASL_USERNAME", SASL_USER)
    monkeypatch.setenv("STREAMDETECT_KAFKA_SASL_PASSWORD", password)


def test_publisher_worker_and_findings_log_in_with_scram_from_the_environment(
    kafka_sasl_bootstrap: str, tmp_path: Path, workers: list[Worker], monkeypatch: pytest.MonkeyPatch
) -> None:
    _login(monkeypatch, "SCRAM-SHA-512")
    path = table1_topology(tmp_path, "sasl-table1")
    expected = {finding.id for finding in streamdetect.check(load_topology(path)).findings}

    published = _cli("publish", str(path), "--bootstrap-servers", kafka_sasl_bootstrap)
    assert published.returncode == 0, published.stderr
    workers.append(Worker(path, kafka_sasl_bootstrap, tmp_path))  # inherits the environment

    def open_ids() -> set[str]:
        listed = _cli("findings", str(path), "--json", "--bootstrap-servers", kafka_sasl_bootstrap)
        assert listed.returncode in (0, 1), listed.stderr
        return {finding["id"] for finding in json.loads(listed.stdout)["findings"]}

    until(lambda: open_ids() == expected, "the findings of Table 1 through the SASL listener", workers[-1])
    # The password never reaches the worker's log, whatever its level.
    assert SASL_PASSWORD not in workers[-1].output()


def test_a_refused_login_is_one_line_and_exit_code_2(
    kafka_sasl_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _login(monkeypatch, "PLAIN", password="wrong-password")
    path = table1_topology(tmp_path, "sasl-refused")
    refused = _cli("publish", str(path), "--bootstrap-servers", kafka_sasl_bootstrap)
    assert refused.returncode == 2
    assert f"accepted a SASL_PLAINTEXT login as '{SASL_USER}' with PLAIN" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert "wrong-password" not in refused.stderr


def test_a_bad_security_variable_stops_every_command_at_its_start(
    kafka_sasl_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMDETECT_KAFKA_SECURITY_PROTOCOL", "SASL_PLAINTEXT")
    path = table1_topology(tmp_path, "sasl-unset")
    for command in ("publish", "worker", "findings"):
        stopped = _cli(command, str(path), "--bootstrap-servers", kafka_sasl_bootstrap)
        assert stopped.returncode == 2, (command, stopped.stderr)
        assert "set STREAMDETECT_KAFKA_SASL_USERNAME and STREAMDETECT_KAFKA_SASL_PASSWORD" in stopped.stderr
