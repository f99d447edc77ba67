"""95% bootstrap intervals over queries: of a pipeline's mean metric, and of the paired difference of two.

Queries are resampled with replacement (percentile bootstrap, seeded); a paired interval resamples the same
queries for both pipelines, so it answers "is A better than B on this set" rather than "how good is A".
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: Resamples per interval and the interval's level.
RESAMPLES, LEVEL = 2000, 0.95


def bootstrap_interval(values: Sequence[float], seed: int = 0) -> tuple[float, float]:
    """The 95% percentile-bootstrap interval of the mean of per-query values.

    :param values: one value per query.
    :param seed: the resampling seed.
    :return: ``(low, high)``.
    """
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        return (0.0, 0.0)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(RESAMPLES, data.size))].mean(axis=1)
    tail = (1 - LEVEL) / 2
    return float(np.quantile(means, tail)), float(np.quantile(means, 1 - tail))


def paired_difference(a: Sequence[float], b: Sequence[float], seed: int = 0) -> tuple[float, float, float]:
    """The mean of ``a - b`` over the same queries and its 95% paired-bootstrap interval.

    :param a: per-query values of one pipeline.
    :param b: per-query values of the other, in the same query order.
    :param seed: the resampling seed.
    :return: ``(mean difference, low, high)``.
    :raises ValueError: when the lists differ in length.
    """
    if len(a) != len(b):
        raise ValueError(f"paired values need the same queries: {len(a)} vs {len(b)}")
    difference = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    low, high = bootstrap_interval(difference, seed)
    return float(difference.mean()) if difference.size else 0.0, low, high
