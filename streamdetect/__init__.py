"""streamdetect: detect privacy disclosure across several released views of one private table.

The public API: :func:`load_topology` reads a topology file, :func:`check` runs the checks over files
(a :class:`Report`), :class:`Detector` keeps every check's state over a stream of :class:`Batch` es.
Names are imported on first use, so that ``import streamdetect`` (and the command line's ``--help``)
loads none of the libraries the checks compute with.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamdetect.api import check, load_topology
    from streamdetect.checks.findings import LinkageFinding
    from streamdetect.detector import Detector
    from streamdetect.engine import Report
    from streamdetect.errors import PredicateError, StreamdetectError, TopologyError
    from streamdetect.model.batch import Batch

#: Each public name and the module it lives in.
_PUBLIC = {
    "Batch": "streamdetect.model.batch",
    "Detector": "streamdetect.detector",
    "LinkageFinding": "streamdetect.checks.findings",
    "PredicateError": "streamdetect.errors",
    "Report": "streamdetect.engine",
    "StreamdetectError": "streamdetect.errors",
    "TopologyError": "streamdetect.errors",
    "check": "streamdetect.api",
    "load_topology": "streamdetect.api",
}

__all__ = [
    "Batch",
    "Detector",
    "LinkageFinding",
    "PredicateError",
    "Report",
    "StreamdetectError",
    "TopologyError",
    "check",
    "load_topology",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (PEP 562); ``__version__`` from the installed
    package's metadata (pyproject.toml holds the one version)."""
    if name == "__version__":
        from importlib.metadata import version  # noqa: PLC0415

        return version("streamdetect")
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'streamdetect' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])
