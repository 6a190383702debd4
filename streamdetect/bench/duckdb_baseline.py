"""The baseline a user would write without streamdetect: one SQL query per channel and attribute pair.

For every channel of the closure and every (identifier E, sensitive S) in its schema::

    SELECT "E", list_sort(list(DISTINCT "S")) FROM v1 NATURAL JOIN v2 ... GROUP BY "E"
    HAVING count(DISTINCT "S") < k

run by DuckDB over the views' distinct rows, each query with a time limit (``interrupt``) and the
whole connection with a memory limit. Queries that do not finish are reported as such. When all finish,
the minimal-level findings are derived and compared with streamdetect's.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import polars as pl

from streamdetect.checks.linkage import LinkageCheck


@dataclass
class BaselineResult:
    """Outcome of the naive queries: wall time, per-query statuses, and findings if all finished."""

    seconds: float = 0.0
    finished: int = 0
    timed_out: int = 0
    failed: int = 0
    slowest: list[tuple[float, str]] = field(default_factory=list)
    findings: set[tuple[str, str, str, int]] = field(default_factory=set)

    @property
    def complete(self) -> bool:
        return self.timed_out == 0 and self.failed == 0


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _join_order(check: LinkageCheck, views: tuple[str, ...]) -> list[str]:
    """Views in an order where each shares an attribute with one before it, as a user would write."""
    schema = {view.name: set(view.attributes) for view in check.views}
    order = [views[0]]
    rest = list(views[1:])
    while rest:
        seen = set().union(*(schema[name] for name in order))
        nxt = next((name for name in rest if schema[name] & seen), rest[0])
        order.append(nxt)
        rest.remove(nxt)
    return order


def run_baseline(
    check: LinkageCheck,
    views: Mapping[str, pl.DataFrame],
    timeout: float = 10.0,
    memory_limit: str = "8GB",
) -> BaselineResult:
    """Run every naive query; ``timeout`` seconds each. Findings are (E, value, S, level) at minimal level."""
    result = BaselineResult()
    connection = duckdb.connect()
    connection.execute(f"SET memory_limit = '{memory_limit}'")
    with tempfile.TemporaryDirectory() as directory:
        for name, frame in views.items():
            path = Path(directory) / f"{len(result.slowest)}-{abs(hash(name))}.parquet"
            frame.write_parquet(path)
            connection.execute(f"CREATE TABLE {_quote(name)} AS SELECT DISTINCT * FROM read_parquet('{path}')")
    disclosed: dict[tuple[str, str, str], int] = {}
    started = time.perf_counter()
    for task in check.tasks:
        order = _join_order(check, task.channel.views)
        source = " NATURAL JOIN ".join(_quote(name) for name in order)
        e, s = _quote(task.identifier), _quote(task.sensitive)
        sql = (
            f"SELECT CAST({e} AS VARCHAR) FROM {source} WHERE {e} IS NOT NULL AND {s} IS NOT NULL "
            f"GROUP BY {e} HAVING count(DISTINCT {s}) < {check.k}"
        )
        timer = threading.Timer(timeout, connection.interrupt)
        query_start = time.perf_counter()
        timer.start()
        try:
            rows = connection.execute(sql).fetchall()
        except duckdb.InterruptException:
            result.timed_out += 1
            continue
        except duckdb.Error:
            result.failed += 1
            continue
        finally:
            timer.cancel()
            label = f"{task.channel.label} {task.identifier}/{task.sensitive}"
            result.slowest.append((time.perf_counter() - query_start, label))
        result.finished += 1
        for (value,) in rows:
            key = (task.identifier, value, task.sensitive)
            disclosed[key] = min(disclosed.get(key, task.channel.level), task.channel.level)
    result.seconds = time.perf_counter() - started
    result.slowest = sorted(result.slowest, reverse=True)[:5]
    result.findings = {(e, value, s, level) for (e, value, s), level in disclosed.items()}
    connection.close()
    return result
