# Numba kernels, one module group per model kind (arrays in, arrays out; no I/O).
#
# Naming: a kernel called from another module has no leading underscore (the package itself is
# private); a helper used only inside its own module has one. lda.py and lda_doc.py still use
# underscores for everything: their names are read by other code and are left as they are.
#
# Argument groups: related arrays travel as typing.NamedTuple (e.g. tcm_restaurants.Restaurants,
# pam.PamState). Serial njit kernels take and return them directly. Kernels compiled with
# parallel=True take flat arrays only: given tuples, numba 0.68 crashes or corrupts memory at
# random while compiling them (a prange body is a gufunc, whose arguments cannot be tuples;
# numba issues #2651, #10139), so a plain Python wrapper unpacks the tuples for them.
