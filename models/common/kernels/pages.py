"""Huge pages for the tables a sampler reads at random.

At collection scale a sampler's hash and count tables outgrow the caches, and on 4 KiB pages
each random read into them also misses the TLB. Linux backs a region advised MADV_HUGEPAGE
with 2 MiB pages when transparent huge pages are on or in their 'madvise' mode; the advice has
to come before the pages are first written, so these tables are allocated empty, advised, then
filled. Where the advice is not available (other systems, huge pages off) it changes nothing;
it never changes what a kernel computes.
"""
import sys

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ..jit import njit

PAGE = 4096
HUGE = 2 << 20  # smaller regions get no 2 MiB page
MADV_HUGEPAGE = 14

if sys.platform.startswith("linux"):
    @intrinsic
    def _madvise(typingctx, addr, length, advice):
        """libc's madvise, linked by name (a ctypes pointer would keep the kernels that reach
        it out of numba's cache)."""
        def codegen(context, builder, sig, args):
            i64, i32 = ir.IntType(64), ir.IntType(32)
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i32, [i64, i64, i32]),
                                                "madvise")
            a, n, m = (context.cast(builder, v, t, to)
                       for v, t, to in zip(args, sig.args, (types.uintp, types.uintp, types.int32)))
            return builder.call(fn, [a, n, m])

        return types.int32(addr, length, advice), codegen

    @njit(cache=True, nogil=True)
    def advise(a):
        """Ask for huge pages under ``a`` (its whole pages); returns madvise's result, 1 when
        ``a`` is too small to hold one."""
        start = a.ctypes.data
        end = start + a.size * a.itemsize
        lo = (start + PAGE - 1) // PAGE * PAGE
        if end - lo < HUGE:
            return 1
        return _madvise(lo, (end - lo) // PAGE * PAGE, MADV_HUGEPAGE)
else:
    @njit(cache=True, nogil=True)
    def advise(a):
        return 1


@njit(cache=True, nogil=True)
def huge_empty(n, dtype):
    """``np.empty(n, dtype)`` on huge pages where the system gives them."""
    a = np.empty(n, dtype=dtype)
    advise(a)
    return a


@njit(cache=True, nogil=True)
def huge_full(n, value, dtype):
    """``np.full(n, value, dtype)`` on huge pages where the system gives them."""
    a = huge_empty(n, dtype)
    a[:] = value
    return a


@njit(cache=True, nogil=True)
def huge_copy(a):
    """A copy of the 1-d array ``a`` on huge pages where the system gives them."""
    out = huge_empty(a.size, a.dtype)
    out[:] = a
    return out
