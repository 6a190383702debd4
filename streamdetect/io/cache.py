"""Where streamdetect keeps what it fetches once and reuses (the Adult wheel, Kafka's jars)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$STREAMDETECT_CACHE``, else ``$XDG_CACHE_HOME/streamdetect``, else ``~/.cache/streamdetect``."""
    explicit = os.environ.get("STREAMDETECT_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "streamdetect"
