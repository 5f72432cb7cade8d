"""scatter_sum: bincount's speed, integer exactness."""

from __future__ import annotations

import numpy as np
import pytest

from tb_memory_plugin._numeric import scatter_sum


def _reference(index, values, size):
    out = np.zeros((size,) + values.shape[1:], dtype=object)
    for i, v in zip(index.tolist(), values.tolist()):
        out[i] = out[i] + (np.array(v, dtype=object) if values.ndim > 1 else v)
    return out


@pytest.mark.parametrize("shape", [(500,), (500, 3)])
def test_sums_like_python_integers(shape):
    rng = np.random.default_rng(1)
    index = rng.integers(0, 40, shape[0])
    values = rng.integers(-(1 << 40), 1 << 40, shape)
    got = scatter_sum(index, values, 50)
    assert got.dtype == np.int64 and got.shape == (50,) + shape[1:]
    assert got.tolist() == _reference(index, values, 50).tolist()


def test_sums_past_float64_precision_stay_exact():
    """2**53 + 1 has no float64; the sums must still come out to the byte."""
    index = np.array([0, 0, 1, 1])
    values = np.array([2**53 + 1, 1, -(2**62), 3])
    assert scatter_sum(index, values, 2).tolist() == [2**53 + 2, -(2**62) + 3]
    assert scatter_sum(index, np.stack([values, -values], axis=1), 2).tolist() == [
        [2**53 + 2, -(2**53) - 2], [-(2**62) + 3, 2**62 - 3]]


def test_magnitudes_whose_sum_passes_int64_still_take_the_exact_sum():
    """Four magnitudes of ~2**62 add up past int64: the check must not wrap around and
    hand them to float64 bincount, which would lose the odd bytes."""
    values = np.array([2**62 + 1, 2**62 + 1, -(2**62), -(2**62)])
    assert scatter_sum(np.zeros(4, dtype=np.int64), values, 1).tolist() == [2]


def test_a_big_value_among_many_small_ones_is_summed_by_bincount_exactly(monkeypatch):
    """Largest magnitude times count passes 2**53 while the sum does not: bincount is
    still exact there, so it sums (not np.add.at), and to the byte."""
    bincount_calls = []

    def counted_bincount(*args, **kwargs):
        bincount_calls.append(args)
        return bincount(*args, **kwargs)

    bincount = np.bincount
    monkeypatch.setattr(np, "bincount", counted_bincount)
    values = np.zeros(1 << 14, dtype=np.int64)
    values[[0, 5]] = [2**40 + 1, 7]
    index = np.arange(values.size) % 3
    assert scatter_sum(index, values, 3).tolist() == [2**40 + 1, 0, 7]
    assert len(bincount_calls) == 1


def test_nothing_to_sum():
    assert scatter_sum(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 4).tolist() == [0, 0, 0, 0]
    assert scatter_sum(np.zeros(0, dtype=np.int64), np.zeros((0, 2), dtype=np.int64), 2).tolist() == [[0, 0], [0, 0]]
