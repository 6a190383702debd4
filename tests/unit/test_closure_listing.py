"""``streamdetect closure`` over many views: refused past --max-channels before any join (naming the
level), filtered by --channels, listed without counts on demand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from streamdetect.bench.many_views import write_many_views
from streamdetect.cli.main import cli
from streamdetect.errors import TopologyError
from streamdetect.io.topology_file import load_topology
from streamdetect.relational.closure import channels_by_level, iter_levels
from streamdetect.relational.universal_stream import UniversalStream


def test_a_closure_past_the_limit_is_refused_naming_the_level(tmp_path: Path) -> None:
    topology = write_many_views(tmp_path, 16, 50)
    result = CliRunner().invoke(cli, ["closure", str(topology), "--max-channels", "200"])
    assert result.exit_code == 2
    assert "passes 200 channels at level" in result.output
    assert "--max-level" in result.output


def test_channels_holding_views_are_those_of_the_whole_closure(tmp_path: Path) -> None:
    topology = write_many_views(tmp_path, 9, 50)
    model = load_topology(topology)
    whole = [c.views for level in channels_by_level(model.views, model.table.attributes) for c in level]
    held = {"v1", "v4"}
    expected = [views for views in whole if held <= set(views)]
    result = CliRunner().invoke(cli, ["closure", str(topology), "--channels", "v1,v4", "--no-counts", "--json"])
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)
    assert [tuple(entry["views"]) for entry in listed] == expected
    assert all("rows" not in entry for entry in listed)
    # Levels below the views held are empty, and the lazy levels are the closure's.
    lazy = [[c.views for c in channels] for channels, _ in iter_levels(model.views, model.table.attributes)]
    assert [views for level in lazy for views in level] == whole


def test_unknown_views_in_the_filter_are_named(tmp_path: Path) -> None:
    topology = write_many_views(tmp_path, 4, 20)
    result = CliRunner().invoke(cli, ["closure", str(topology), "--channels", "v1,v99"])
    assert result.exit_code == 2
    assert "v99" in result.output


def test_a_universal_stream_of_too_many_channels_is_refused_at_the_start(tmp_path: Path) -> None:
    topology = load_topology(write_many_views(tmp_path, 16, 20))
    with pytest.raises(TopologyError, match="universal-relation stream emits every channel"):
        UniversalStream(topology, cap=10)
