"""The command line starts light: ``--help`` and option errors load none of the libraries the checks
compute with (polars, networkx, Faust, the Kafka client), and ``import streamdetect`` neither; the
public names load on first use."""

from __future__ import annotations

import subprocess
import sys

import pytest

import streamdetect

HEAVY = ("polars", "numpy", "networkx", "faust", "kafka", "aiokafka", "lark", "prometheus_client", "pysat")


def _cli(*arguments: str) -> str:
    """Run the command line with these arguments in the probe (it exits)."""
    return f"from streamdetect.cli.main import cli\ntry:\n    cli({list(arguments)!r})\nexcept SystemExit:\n    pass"


def _loaded_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(done.stdout.split())


@pytest.mark.parametrize(
    "code",
    [
        "import streamdetect",
        "import streamdetect.errors",
        _cli("--help"),
        _cli("worker", "--help"),
        _cli("check", "--check", "nonesuch", "x.yaml"),
    ],
    ids=["import", "errors", "help", "worker-help", "bad-option"],
)
def test_light_paths_load_no_heavy_library(code: str) -> None:
    loaded = _loaded_after(code)
    heavy = sorted(name for name in HEAVY if name in loaded)
    assert not heavy, f"loaded {', '.join(heavy)}"


def test_the_probe_sees_a_heavy_import() -> None:
    assert "polars" in _loaded_after("import streamdetect\nstreamdetect.Detector")


def test_every_public_name_loads() -> None:
    for name in streamdetect.__all__:
        assert getattr(streamdetect, name).__name__ == name
    assert set(dir(streamdetect)) >= set(streamdetect.__all__)
    with pytest.raises(AttributeError, match="nonesuch"):
        _ = streamdetect.nonesuch  # type: ignore[attr-defined]
