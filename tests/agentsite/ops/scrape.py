"""Reading /metrics in tests: the samples of a Prometheus text page."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples_of(text: str) -> Samples:
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def value(samples: Samples, name: str, **labels: Any) -> float | None:
    """The value of the sample ``name`` with exactly ``labels``, or None when absent."""
    return samples.get((name, frozenset((k, str(v)) for k, v in labels.items())))
