"""Small numpy helpers shared by decoding and analysis."""

from __future__ import annotations

import numpy as np

_EXACT = 2**53  # float64 holds every integer below this exactly


def scatter_sum(index: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """out[i] = sum of values[j] where index[j] == i, as int64; values may be 1-D or 2-D
    (or a tuple or list of columns, as 2-D).

    Where each index comes once, in order, the values are placed as they are.
    Otherwise np.bincount, an order of magnitude faster than np.add.at, sums in
    float64, which is exact while every partial sum stays below 2**53 bytes
    (8 PiB), so that is checked and np.add.at is the fallback. 2-D values are
    summed column by column (one bincount each), into a column-major result:
    each column is written, and read again by a later sum, in one stride.
    """
    if not isinstance(values, (tuple, list)):
        values = np.asarray(values, dtype=np.int64)
        if values.ndim == 1:
            return _column_sum(index, values, size, _each_once(index))
        values = [values[:, column] for column in range(values.shape[1])]
    once = _each_once(index)  # asked once for all the columns
    out = np.empty((size, len(values)), dtype=np.int64, order="F")
    for column, column_values in enumerate(values):
        out[:, column] = _column_sum(index, np.asarray(column_values, dtype=np.int64), size, once)
    return out


def _each_once(index: np.ndarray) -> bool:
    """Whether each index comes once, in order (a deep step's names, a CPU step's one entry per op)."""
    return index.size <= 1 or bool((index[1:] > index[:-1]).all())


def _column_sum(index: np.ndarray, values: np.ndarray, size: int, once: bool) -> np.ndarray:
    if index.size == 0:
        return np.zeros(size, dtype=np.int64)
    if once:  # the values are their own sums, placed
        out = np.zeros(size, dtype=np.int64)
        out[index] = values
        return out
    # Exact when every partial sum stays below 2**53: checked by the largest magnitude
    # times the count first (two reductions), by the sum of magnitudes if that fails (in
    # float64, which cannot wrap as int64 would, with room for its rounding).
    bound = max(int(values.max(initial=0)), -int(values.min(initial=0))) * len(values)
    if bound >= _EXACT and float(np.abs(values.astype(np.float64)).sum()) >= _EXACT / 2:
        out = np.zeros(size, dtype=np.int64)
        np.add.at(out, index, values)
        return out
    return np.bincount(index, weights=values, minlength=size).astype(np.int64)
