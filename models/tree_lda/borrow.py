"""Borrowed array views: a kernel's hot loop without numba's reference counting.

numba counts references to every array it binds to a variable, and a helper inlined at the IR
level (``inline="always"``) binds each of its array arguments anew: the tree-LDA sparse draw
made 56 calls to NRT_incref / NRT_decref per token (counted with gdb), each a locked increment
that also stalls the loads around it: 46% of the kernel's perf samples. A view with no
memory-info pointer makes those calls return at once. The view does not keep its array alive,
so it may only be used while the array is held elsewhere: inside the call that made it, never
returned or stored.
"""
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def borrowed(typingctx, arr):
    """The array ``arr`` (same data, shape and strides) without its memory-info pointer."""
    def codegen(context, builder, sig, args):
        src = context.make_array(sig.args[0])(context, builder, value=args[0])
        out = context.make_array(sig.return_type)(context, builder)
        for field in ("data", "shape", "strides", "itemsize", "nitems"):
            setattr(out, field, getattr(src, field))
        out.meminfo = cgutils.get_null_value(out.meminfo.type)
        out.parent = cgutils.get_null_value(out.parent.type)
        return out._getvalue()

    return arr(arr), codegen
