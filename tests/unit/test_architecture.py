"""The pure core imports no I/O, framework, Kafka, metrics or CLI library, and no edge module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "streamdetect"
CORE = ["model", "relational", "checks", "remediation", "engine.py", "detector.py", "errors.py", "windowing.py"]
FORBIDDEN_MODULES = (
    "yaml",
    "click",
    "rich",
    "faust",
    "kafka",
    "prometheus_client",
    "duckdb",
    "faker",
    "subprocess",
    "streamdetect.io",
    "streamdetect.cli",
    "streamdetect.reporting",
    "streamdetect.bench",
    "streamdetect.stream",
    "streamdetect.api",
)
FORBIDDEN_CALLS = {
    "open",
    "read_csv",
    "read_parquet",
    "write_csv",
    "write_parquet",
    "scan_csv",
    "scan_parquet",
    "eval",
    "exec",
}


def _core_files() -> list[Path]:
    files: list[Path] = []
    for entry in CORE:
        path = PACKAGE / entry
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return files


@pytest.mark.parametrize("path", _core_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_core_module_stays_pure(path: Path) -> None:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        for name in names:
            assert not any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN_MODULES), (
                f"{path.name} imports {name}"
            )
        if isinstance(node, ast.Call):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            assert called not in FORBIDDEN_CALLS, f"{path.name} calls {called}() in the pure core"


def test_the_guard_sees_the_core() -> None:
    assert len(_core_files()) >= 10
