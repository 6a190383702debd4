"""The Grafana dashboard of streamdetect workers, as code (grafana-foundation-sdk).

    python deploy/grafana/dashboard.py > deploy/grafana/dashboards/streamdetect.json

tests/unit/test_deploy.py regenerates it and compares with the committed JSON, and checks that every
query reads only metrics a worker exposes (docs/streaming.md, "Metrics").
"""

from __future__ import annotations

import json

from grafana_foundation_sdk.builders import dashboard, prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef

DATASOURCE = DataSourceRef(type_val="prometheus", uid="prometheus")

#: (title, unit, [(PromQL, legend)]) per panel, in reading order.
PANELS: list[tuple[str, str, list[tuple[str, str]]]] = [
    (
        "Open findings by check and level",
        "short",
        [("sum by (check, level) (streamdetect_open_findings)", "{{check}} level {{level}}")],
    ),
    (
        "Findings raised and cleared per second",
        "ops",
        [
            ("sum by (check) (rate(streamdetect_findings_raised_total[5m]))", "raised {{check}}"),
            ("sum by (check) (rate(streamdetect_findings_cleared_total[5m]))", "cleared {{check}}"),
        ],
    ),
    (
        "Detection latency (publication to finding)",
        "s",
        [
            (
                f"histogram_quantile({q}, sum by (le) (rate(streamdetect_detection_latency_seconds_bucket[5m])))",
                f"p{round(q * 100)}",
            )
            for q in (0.5, 0.9, 0.99)
        ],
    ),
    (
        "Rows consumed per second, by view",
        "rowsps",
        [("sum by (view, op) (rate(streamdetect_rows_consumed_total[5m]))", "{{view}} {{op}}")],
    ),
    (
        "Batch processing time",
        "s",
        [
            (
                "histogram_quantile(0.99, sum by (le) (rate(streamdetect_batch_processing_seconds_bucket[5m])))",
                "p99",
            )
        ],
    ),
    (
        "Time folding records in, per check (cores busy)",
        "percentunit",
        [("sum by (check) (rate(streamdetect_check_seconds_total[5m]))", "{{check}}")],
    ),
    (
        "Consumer lag (records not yet read)",
        "short",
        [("sum by (topic) (streamdetect_consumer_lag)", "{{topic}}")],
    ),
    (
        "Dead letters and replays per second",
        "ops",
        [
            ("sum by (reason) (rate(streamdetect_dead_letters_total[5m]))", "dead letter: {{reason}}"),
            ("sum by (view) (rate(streamdetect_records_replayed_total[5m]))", "replayed: {{view}}"),
        ],
    ),
    (
        "Checks blind to an input, topics misconfigured (1: yes)",
        "short",
        [
            ("max by (check, input) (streamdetect_inputs_missing)", "{{check}} lacks {{input}}"),
            ("max by (topic, setting) (streamdetect_topic_misconfigured)", "{{topic}} topic: {{setting}}"),
        ],
    ),
]


def build() -> dict[str, object]:
    """The dashboard as Grafana's JSON model."""
    board = (
        dashboard.Dashboard("streamdetect")
        .uid("streamdetect")
        .tags(["streamdetect", "privacy"])
        .refresh("30s")
        .time("now-1h", "now")
        .with_panel(
            stat.Panel()
            .title("Certain findings open")
            .datasource(DATASOURCE)
            .unit("short")
            .span(6)
            .height(4)
            .with_target(
                prometheus.Dataquery()
                .expr('sum(streamdetect_open_findings{certain="true"})')
                .legend_format("certain")
                .ref_id("A")
            )
        )
        .with_panel(
            stat.Panel()
            .title("Workers up")
            .datasource(DATASOURCE)
            .unit("short")
            .span(6)
            .height(4)
            .with_target(prometheus.Dataquery().expr('sum(up{job="streamdetect"})').legend_format("up").ref_id("A"))
        )
    )
    for title, unit, queries in PANELS:
        panel = timeseries.Panel().title(title).datasource(DATASOURCE).unit(unit).span(12).height(8)
        for ref, (expr, legend) in zip("ABCDEFGH", queries, strict=False):
            panel = panel.with_target(prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref))
        board = board.with_panel(panel)
    model = board.build()
    return json.loads(json.dumps(model, cls=JSONEncoder))


def render() -> str:
    """The committed file's text."""
    return json.dumps(build(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    print(render(), end="")
