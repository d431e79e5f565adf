# Numba kernels the model kinds share (arrays in, arrays out; no I/O); each kind's own kernels live
# in its folder (models/lda/kernels.py, ...).
#
# Naming: a kernel called from another module has no leading underscore (the package itself is
# private); a helper used only inside its own module has one. models/lda/kernels.py still uses
# underscores for everything: its names are read by other code and are left as they are.
#
# Argument groups: related arrays travel as typing.NamedTuple (e.g. models.lda.doc_kernels.WordLists,
# models.pam.kernels.PamState); no serial kernel takes more than 12 positional arguments. Serial
# njit kernels take and return the tuples directly. Kernels compiled with parallel=True take flat
# arrays only: given tuples, numba 0.68 crashes or corrupts memory at random while compiling them
# (a prange body is a gufunc, whose arguments cannot be tuples; numba issues #2651, #10139), so
# they build the tuples inside the prange body, or a plain Python wrapper unpacks them for them.
