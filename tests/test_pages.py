"""Huge pages for the tables a sampler reads at random (models/common/kernels/pages.py): the
arrays are numpy's, the advice reaches the kernel, and kernels that use it stay cacheable."""
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from numba import njit

from models.common.kernels.pages import HUGE, advise, huge_copy, huge_empty, huge_full

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def test_arrays_are_what_numpy_would_give():
    a = huge_full(HUGE, -1, np.int64)
    assert a.dtype == np.int64 and a.shape == (HUGE,) and (a == -1).all()
    b = huge_copy(a[:1000])
    assert b.dtype == np.int64 and (b == -1).all() and not np.shares_memory(a, b)
    assert huge_empty(7, np.uint64).dtype == np.uint64
    assert huge_full(3, np.uint64(2**64 - 1), np.uint64).tolist() == [2**64 - 1] * 3


def test_small_arrays_are_left_alone_and_large_ones_advised():
    assert advise(np.zeros(100)) == 1
    if not sys.platform.startswith("linux"):
        assert advise(np.zeros(HUGE)) == 1
        return
    # madvise accepts the range (0) wherever the kernel has transparent huge pages
    if not THP.exists() or "[never]" in THP.read_text():
        pytest.skip("no transparent huge pages on this machine")
    assert advise(np.zeros(HUGE)) == 0


def test_a_kernel_using_them_stays_cacheable(tmp_path, monkeypatch):
    # a ctypes function pointer would keep every caller out of numba's cache (a warning)
    @njit(cache=True)
    def table(n):
        return huge_full(n, 0, np.int32)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert table(10).tolist() == [0] * 10
