"""A software prefetch for kernels whose next memory access is known but far away in memory.

``prefetch(a, i)`` (``prefetch2(a, i, j)`` for a 2-d array) asks the CPU to bring ``a[i]``
(``a[i, j]``) into the cache (LLVM's ``llvm.prefetch``: a read, kept in all levels) and does
nothing else: no fault, no change of any value, no bounds checked. Under ``NUMBA_DISABLE_JIT=1``
both are no-op Python functions.
"""
from llvmlite import ir
from numba import config, types
from numba.core import cgutils
from numba.extending import intrinsic


def _codegen(context, builder, signature, args):
    aryty = signature.args[0]
    ary = context.make_array(aryty)(context, builder, args[0])
    idx = [context.cast(builder, a, t, types.intp) for a, t in zip(args[1:], signature.args[1:])]
    ptr = cgutils.get_item_pointer(context, builder, aryty, ary, idx, wraparound=False)
    i32 = ir.IntType(32)
    # one declaration per module whatever the array's dtype: the pointer goes as i8*
    byte_ptr = ir.IntType(8).as_pointer()
    fn = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(ir.VoidType(), [byte_ptr, i32, i32, i32]),
        "llvm.prefetch.p0")
    # read (0), highest locality (3), data cache (1)
    builder.call(fn, [builder.bitcast(ptr, byte_ptr), ir.Constant(i32, 0), ir.Constant(i32, 3),
                      ir.Constant(i32, 1)])
    return context.get_dummy_value()


@intrinsic
def _prefetch(typingctx, arr, idx):
    return types.void(arr, idx), _codegen


@intrinsic
def _prefetch2(typingctx, arr, i, j):
    return types.void(arr, i, j), _codegen


if config.DISABLE_JIT:
    def prefetch(arr, idx):
        """No-op without the JIT."""

    def prefetch2(arr, i, j):
        """No-op without the JIT."""
else:
    prefetch, prefetch2 = _prefetch, _prefetch2
