"""A batch's sparse row gradient written into the dense buffer Adam reads (arrays in, arrays
out; no I/O). Serial, without the GIL: called while torch trains, where a numba parallel region
would start the OpenMP threads that torch's own operations then split their sums over."""
from ..common.jit import njit


@njit(cache=True, nogil=True)
def move_rows(buf, old_rows, rows, values):
    """buf[old_rows] = 0, then buf[rows] = values: the previous batch's rows cleared and this
    batch's written, the rest of buf (V, width) untouched."""
    for i in range(len(old_rows)):
        buf[old_rows[i], :] = 0.0
    for i in range(len(rows)):
        buf[rows[i], :] = values[i, :]
