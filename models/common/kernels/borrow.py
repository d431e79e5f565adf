"""Borrowed array views: a kernel's hot loop without numba's reference counting.

numba counts references to every array it binds to a variable, and a helper inlined at the IR
level (``inline="always"``) binds each of its array arguments anew: every binding is a call to
NRT_incref / NRT_decref, a locked increment that also stalls the loads around it. A view with no
memory-info pointer makes those calls return at once. The view does not keep its array alive,
so it may only be used while the array is held elsewhere: inside the call that made it, never
returned or stored.
"""
from numba import config
from numba.core import cgutils, types
from numba.extending import intrinsic


def _borrow_array(context, builder, aryty, value):
    src = context.make_array(aryty)(context, builder, value=value)
    out = context.make_array(aryty)(context, builder)
    for field in ("data", "shape", "strides", "itemsize", "nitems"):
        setattr(out, field, getattr(src, field))
    out.meminfo = cgutils.get_null_value(out.meminfo.type)
    out.parent = cgutils.get_null_value(out.parent.type)
    return out._getvalue()


@intrinsic
def borrowed(typingctx, arr):
    """The array ``arr`` (same data, shape and strides) without its memory-info pointer; of a
    tuple of arrays and numbers (a NamedTuple of a kernel's arrays), the same tuple with every
    array borrowed."""
    if isinstance(arr, types.Array):
        def codegen(context, builder, sig, args):
            return _borrow_array(context, builder, sig.args[0], args[0])

        return arr(arr), codegen
    if isinstance(arr, types.BaseTuple) and all(isinstance(t, (types.Array, types.Number))
                                                for t in arr):
        def codegen(context, builder, sig, args):
            out = args[0]
            for i, t in enumerate(sig.args[0]):
                if isinstance(t, types.Array):
                    v = _borrow_array(context, builder, t, builder.extract_value(args[0], i))
                    out = builder.insert_value(out, v, i)
            return out

        return arr(arr), codegen
    return None


if config.DISABLE_JIT:
    def borrow(arr):
        """The argument itself without the JIT (``borrowed`` is an intrinsic)."""
        return arr
else:
    borrow = borrowed
