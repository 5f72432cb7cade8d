"""Small numpy helpers shared by decoding and analysis."""

from __future__ import annotations

import numpy as np

_EXACT = 2**53  # float64 holds every integer below this exactly


def scatter_sum(index: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """out[i] = sum of values[j] where index[j] == i, as int64; values may be 1-D or 2-D.

    np.bincount is an order of magnitude faster than np.add.at; it sums in
    float64, which is exact while every partial sum stays below 2**53 bytes
    (8 PiB), so that is checked and np.add.at is the fallback.
    """
    values = np.asarray(values, dtype=np.int64)
    shape = (size,) + values.shape[1:]
    if index.size == 0:
        return np.zeros(shape, dtype=np.int64)
    # Exact when every partial sum stays below 2**53: checked by the largest magnitude
    # times the count first (two reductions), by the sums of magnitudes if that fails.
    bound = max(int(values.max(initial=0)), -int(values.min(initial=0))) * len(values)
    if bound >= _EXACT and int(np.abs(values).sum(axis=0).max()) >= _EXACT:
        out = np.zeros(shape, dtype=np.int64)
        np.add.at(out, index, values)
        return out
    if values.ndim == 1:
        return np.bincount(index, weights=values, minlength=size).astype(np.int64)
    # One bincount over (row, column) pairs flattened into row * width + column.
    width = values.shape[1]
    flat = (np.asarray(index, dtype=np.int64)[:, None] * width + np.arange(width)).ravel()
    return np.bincount(flat, weights=values.ravel(), minlength=size * width).astype(np.int64).reshape(shape)
