"""R loo's Monte Carlo error of elpd: the variance of ``log(1 + c q)`` over 1000 normal
quantiles ``q``, for many scales ``c`` at once, with the vectorised ``log``.

NumPy reference: ``numpy.var(numpy.log1p(c q[kept]), ddof=1)``
(``tests/array/kernels/test_mcse.py``).
"""

from __future__ import annotations

import numpy as np

from bayesij.array.kernels.fastmath import fused, log, reordered

__all__ = ["log_variances"]


@fused
def _log_variances(scales, quantiles, out):
    logs = np.empty(quantiles.shape[0])
    for r in range(scales.shape[0]):
        for i in range(quantiles.shape[0]):
            logs[i] = log(max(1.0 + scales[r] * quantiles[i], 1e-300))
        out[r] = _kept_variance(logs, scales[r], quantiles)


@reordered
def _kept_variance(logs, scale, quantiles):
    """Sample variance of ``logs[i]`` over the ``i`` with ``1 + scale quantiles[i] > 0``
    (vectorised)."""
    count = 0.0
    total = 0.0
    for i in range(logs.shape[0]):
        keep = 1.0 + scale * quantiles[i] > 0
        count += keep
        total += logs[i] if keep else 0.0
    mean = total / count
    squares = 0.0
    for i in range(logs.shape[0]):
        keep = 1.0 + scale * quantiles[i] > 0
        squares += (logs[i] - mean) ** 2 if keep else 0.0
    return squares / (count - 1)


def log_variances(scales: np.ndarray, quantiles: np.ndarray) -> np.ndarray:
    """Sample variances (divisor count - 1) of ``log(1 + c q)`` over the quantiles ``q``
    where ``1 + c q > 0``, for each scale ``c``: shape (n_scales,). The logarithms are
    vectorised (:func:`log_positive`), about 1 ns each."""
    out = np.empty(len(scales))
    _log_variances(np.asarray(scales, dtype=np.float64), np.asarray(quantiles, np.float64), out)
    return out
