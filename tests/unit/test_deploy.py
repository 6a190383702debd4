"""The deployment files: the compose file validates, the alert rules pass their unit tests and read only
metrics a worker exposes."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from streamdetect.stream.metrics import WorkerMetrics
from streamdetect.stream.security import VARIABLES

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = ROOT / "deploy" / "prometheus"


def _compose() -> Path:
    import compose

    # The package's own binary: its console script always exits 0.
    return Path(compose.__file__).parent / "docker-compose"


def _config(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(_compose()), "-f", str(path), "config", "-q"], capture_output=True, text=True, check=False, timeout=60
    )


def test_the_compose_file_validates(tmp_path: Path) -> None:
    done = _config(ROOT / "docker-compose.yml")
    assert done.returncode == 0, done.stderr
    # The validator does reject a broken file (so the check above can fail).
    broken = tmp_path / "docker-compose.yml"
    broken.write_text((ROOT / "docker-compose.yml").read_text().replace("    command:", "    comand:", 1))
    assert _config(broken).returncode != 0


def test_the_compose_services_run_the_documented_commands() -> None:
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    assert {"kafka", "worker", "publisher", "prometheus"} <= set(services)
    assert services["worker"]["command"][0] == "worker"
    assert "--metrics-port" in services["worker"]["command"]


def test_the_compose_services_pass_kafka_security_through_from_the_shell() -> None:
    environment = {**os.environ, **{name: f"value-of-{name}" for name in VARIABLES}}
    done = subprocess.run(
        [str(_compose()), "-f", str(ROOT / "docker-compose.yml"), "config", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env=environment,
    )
    services = json.loads(done.stdout)["services"]
    for name in ("worker", "publisher"):
        passed = services[name]["environment"]
        assert {variable: passed.get(variable) for variable in VARIABLES} == {
            variable: f"value-of-{variable}" for variable in VARIABLES
        }, name
    assert services["worker"]["environment"]["STREAMDETECT_PARTITIONS"] == "2"


def test_alert_rules_read_only_metrics_a_worker_exposes() -> None:
    suffixes = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_count", "_sum")}
    exposed = {
        family.name + suffix for family in WorkerMetrics().registry.collect() for suffix in suffixes[family.type]
    }
    rules = yaml.safe_load((PROMETHEUS / "alerts.yml").read_text())
    used = {
        name
        for group in rules["groups"]
        for rule in group["rules"]
        for name in re.findall(r"streamdetect_\w+", rule["expr"])
    }
    assert used
    assert used <= exposed, used - exposed


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool missing: apt install prometheus")
def test_promtool_accepts_the_config_and_the_rules_pass_their_tests() -> None:
    for command in (
        ["promtool", "check", "config", "prometheus.yml"],
        ["promtool", "test", "rules", "alerts_test.yml"],
    ):
        done = subprocess.run(command, cwd=PROMETHEUS, capture_output=True, text=True, check=False, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr


def _manifests() -> list[dict[str, object]]:
    return [doc for doc in yaml.safe_load_all((ROOT / "deploy" / "k8s" / "worker.yaml").read_text()) if doc]


def test_the_kubernetes_manifests_validate_strictly() -> None:
    import kubernetes_validate

    manifests = _manifests()
    assert [doc["kind"] for doc in manifests] == ["ConfigMap", "Deployment", "Service"]
    for doc in manifests:
        kubernetes_validate.validate(doc, "1.30.0", strict=True)
    worker = manifests[1]["spec"]["template"]["spec"]["containers"][0]
    assert worker["envFrom"] == [{"secretRef": {"name": "streamdetect-kafka-security", "optional": True}}]
    broken = _manifests()[1]
    broken["spec"]["replica"] = 1  # type: ignore[index]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, "1.30.0", strict=True)


def test_the_rocksdb_workers_are_a_stateful_set_with_a_volume_each_in_place_of_the_deployment() -> None:
    """worker-rocksdb.yaml replaces worker.yaml's Deployment: the same container but for the store, its
    --datadir on a volume claimed per worker, under a governing Service; strictly valid."""
    import kubernetes_validate

    manifests = [
        doc for doc in yaml.safe_load_all((ROOT / "deploy" / "k8s" / "worker-rocksdb.yaml").read_text()) if doc
    ]
    assert [doc["kind"] for doc in manifests] == ["Service", "StatefulSet"]
    for doc in manifests:
        kubernetes_validate.validate(doc, "1.30.0", strict=True)
    service, stateful = manifests
    assert stateful["spec"]["serviceName"] == service["metadata"]["name"]
    assert service["spec"]["clusterIP"] == "None"
    pod = stateful["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    assert args[args.index("--store") + 1] == "rocksdb://"
    mounts = {mount["name"]: mount["mountPath"] for mount in container["volumeMounts"]}
    assert args[args.index("--datadir") + 1] == mounts["data"]
    assert [claim["metadata"]["name"] for claim in stateful["spec"]["volumeClaimTemplates"]] == ["data"]
    assert "data" not in {volume["name"] for volume in pod["volumes"]}  # the claim's, not an emptyDir
    # The rest as the Deployment runs it: the same topology, environment, probe and security.
    deployment = _manifests()[1]["spec"]["template"]["spec"]  # type: ignore[index]
    (deployed,) = deployment["containers"]
    without_store = [a for i, a in enumerate(args) if a != "--store" and (i == 0 or args[i - 1] != "--store")]
    assert without_store == deployed["args"]
    for key in ("env", "envFrom", "ports", "resources", "readinessProbe", "image"):
        assert container[key] == deployed[key]
    assert stateful["spec"]["selector"] == _manifests()[1]["spec"]["selector"]  # type: ignore[index]


def test_the_configmaps_topology_is_the_shipped_example(tmp_path: Path) -> None:
    from streamdetect.io.topology_file import load_topology

    path = tmp_path / "topology.yaml"
    path.write_text(_manifests()[0]["data"]["topology.yaml"])  # type: ignore[index]
    shipped = load_topology(ROOT / "topologies" / "dou-patients.yaml")
    mapped = load_topology(path)
    assert (mapped.name, mapped.table.attributes, mapped.checks) == (
        shipped.name,
        shipped.table.attributes,
        shipped.checks,
    )
    assert [(v.name, v.attributes) for v in mapped.views] == [(v.name, v.attributes) for v in shipped.views]


def _dashboard_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "streamdetect_dashboard", ROOT / "deploy" / "grafana" / "dashboard.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_dashboard_is_what_its_code_builds() -> None:
    committed = (ROOT / "deploy" / "grafana" / "dashboards" / "streamdetect.json").read_text()
    assert committed == _dashboard_module().render(), (
        "run: python deploy/grafana/dashboard.py > deploy/grafana/dashboards/streamdetect.json"
    )


def test_every_dashboard_query_reads_metrics_a_worker_exposes() -> None:
    document = json.loads((ROOT / "deploy" / "grafana" / "dashboards" / "streamdetect.json").read_text())
    queries = [target["expr"] for panel in document["panels"] for target in panel["targets"]]
    assert len(queries) >= 10
    used = {name for query in queries for name in re.findall(r"streamdetect_\w+", query)}
    suffixes = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_count", "_sum")}
    exposed = {
        family.name + suffix for family in WorkerMetrics().registry.collect() for suffix in suffixes[family.type]
    }
    assert used <= exposed, used - exposed
    titles = " ".join(panel["title"] for panel in document["panels"]).lower()
    for topic in ("open findings", "raised and cleared", "latency", "rows consumed", "dead letters"):
        assert topic in titles
