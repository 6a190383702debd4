"""``streamdetect bench``: generate the BP benchmark and time checks (filled in below)."""

from __future__ import annotations

import click


@click.group()
def bench() -> None:
    """Benchmarks: the BP data of Dou & Coulondre, section 4, and timed runs."""
