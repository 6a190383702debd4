"""The latency quantiles `bench stream` reports from the workers' histograms."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from streamdetect.bench.stream import _quantile, check_seconds, quantiles
from streamdetect.stream.metrics import WorkerMetrics, samples

NAME = "streamdetect_detection_latency_seconds"


def _histogram(values: list[float]) -> dict[str, float]:
    registry = CollectorRegistry()
    histogram = Histogram(NAME, "latency", buckets=(0.5, 0.75, 0.9, 1.0, 1.5), registry=registry)
    for value in values:
        histogram.observe(value)
    return samples(generate_latest(registry).decode())


def test_a_quantile_is_interpolated_in_its_bucket_as_histogram_quantile_does() -> None:
    # 100 samples: 50 at 0.2 (bucket 0.5), 40 at 0.8 (bucket 0.9), 10 at 0.95 (bucket 1.0).
    found = _histogram([0.2] * 50 + [0.8] * 40 + [0.95] * 10)
    # p50: rank 50 is the last of the first bucket: its upper bound, 0.5.
    assert _quantile(found, NAME, 0.5) == pytest.approx((0.5, 0.5))
    # p70: rank 70, 20 of the 40 samples of (0.75, 0.9]: half way, 0.825.
    assert _quantile(found, NAME, 0.7) == pytest.approx((0.825, 0.9))
    # p99: rank 99, 9 of the 10 samples of (0.9, 1.0]: 0.99, under the bound 1.0.
    assert _quantile(found, NAME, 0.99) == pytest.approx((0.99, 1.0))


def test_no_samples_or_a_quantile_past_the_last_bound_gives_none() -> None:
    assert _quantile(_histogram([]), NAME, 0.99) is None
    assert _quantile(_histogram([0.1, 9.0]), NAME, 0.99) is None
    assert quantiles(_histogram([0.1, 9.0]), NAME, 0.5, 0.99) == {
        "p50": pytest.approx(0.5),
        "p50_le": 0.5,
        "p99": None,
        "p99_le": None,
    }


def test_the_time_in_each_check_is_read_per_check_from_the_counter() -> None:
    metrics = WorkerMetrics()
    metrics.check_seconds.labels("linkage").inc(1.5)
    metrics.check_seconds.labels("k-anonymity").inc(0.25)
    metrics.check_seconds.labels("linkage").inc(0.5)
    found = samples(generate_latest(metrics.registry).decode())
    assert check_seconds(found) == {"linkage": 2.0, "k-anonymity": 0.25}
