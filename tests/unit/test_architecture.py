"""The pure core imports no I/O, framework, Kafka, metrics or CLI library, and no edge module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "streamdetect"
CORE = [
    "model",
    "relational",
    "checks",
    "remediation",
    "engine.py",
    "detector.py",
    "check_plan.py",
    "partitioning.py",
    "errors.py",
    "windowing.py",
]
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


#: The layers, lowest first: a module may import from its own layer and the ones below, never above.
#: The pure core is layers 0-5; every edge (files, reports, the stream, the command line, benchmarks)
#: sits on top of it.
LAYERS: list[tuple[str, ...]] = [
    ("errors",),
    ("model",),
    ("relational",),
    ("checks",),
    ("windowing", "check_plan", "detector", "partitioning"),
    ("engine",),
    ("remediation",),
    ("api", "io", "reporting", "stream", "cli", "bench", "__init__", "__main__"),
]


def _layer_of(module: str) -> int:
    """The layer of ``streamdetect.<part>...`` (its first part names it)."""
    part = module.split(".")[1] if "." in module else "__init__"
    for number, layer in enumerate(LAYERS):
        if part in layer:
            return number
    raise AssertionError(f"{module} is in no layer: add its package to LAYERS")


def _package_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _module_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 2 else parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every streamdetect module ``path`` imports (at the top, in a function or for type checking)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
    return [(line, name) for line, name in found if name == "streamdetect" or name.startswith("streamdetect.")]


@pytest.mark.parametrize("path", _package_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down_the_layers(path: Path) -> None:
    module = _module_of(path)
    mine = _layer_of(module)
    for line, imported in _imports(path):
        if imported == "streamdetect":
            continue
        theirs = _layer_of(imported)
        assert theirs <= mine, f"{module} (layer {mine}) imports {imported} (layer {theirs}) at line {line}"


def test_the_layer_guard_sees_an_upward_import(tmp_path: Path) -> None:
    assert _layer_of("streamdetect.relational.bags") < _layer_of("streamdetect.checks.protocol")
    upward = tmp_path / "upward.py"
    upward.write_text("from streamdetect.detector import Detector\n")
    assert _imports(upward) == [(1, "streamdetect.detector")]
    assert _layer_of("streamdetect.detector") > _layer_of("streamdetect.model.batch")


#: The modules that must ask the registry about a check, never name one: what runs the checks, reports
#: them, streams them and counts them.
NAME_BLIND = [
    "engine.py",
    "detector.py",
    "check_plan.py",
    "partitioning.py",
    "reporting",
    "stream/worker",
    "stream/service.py",
    "stream/events.py",
    "stream/metrics.py",
]


def _name_blind_files() -> list[Path]:
    files: list[Path] = []
    for entry in NAME_BLIND:
        path = PACKAGE / entry
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return files


def _check_names_in(path: Path) -> list[tuple[int, str]]:
    """The string literals of ``path`` that name a registered check (docstrings are prose, not code)."""
    from streamdetect.checks.registry import REGISTRY

    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and node.value in REGISTRY
    ]


@pytest.mark.parametrize("path", _name_blind_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_check_is_named_outside_its_package_and_the_registry(path: Path) -> None:
    assert not _check_names_in(path), f"{path.name} names checks: {_check_names_in(path)}"


def test_the_name_guard_sees_a_name(tmp_path: Path) -> None:
    named = tmp_path / "named.py"
    named.write_text('"""Mentions linkage in prose."""\n\nif name == "linkage":\n    pass\n')
    assert _check_names_in(named) == [(3, "linkage")]
    assert len(_name_blind_files()) >= 10
