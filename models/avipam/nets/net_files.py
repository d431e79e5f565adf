"""Network states of files written by earlier versions, read in the current layout (numpy
arrays, before validation: what a file holds is then checked against today's network)."""
import numpy as np

_OLD, _NEW = ".fc1.weight", ".fc1.rows"
# buffers that earlier versions saved and the network now keeps to itself (zero when saved)
_UNSAVED = (".em_counts",)


def term_major(arrays, param_names=(), prefix="net."):
    """The encoders' first layers written as ``nn.Linear`` (``fc1.weight``, (width, V)) moved to
    :class:`models.avipam.nets.pam_net.TermLayer`'s ``fc1.rows`` (V, width), in place; a state that is
    term-major already is left as it is. ``param_names``: the network's parameter names in
    optimizer order, for a checkpoint whose Adam moments (``opt.<i>.exp_avg``, ``exp_avg_sq``)
    follow their parameter's layout. Buffers that earlier versions saved and the network keeps
    to itself now (the M-step's counts, zero in every file) are dropped. Returns the names of the
    moved entries."""
    for key in [k for k in arrays if k.startswith(prefix) and k.endswith(_UNSAVED)]:
        del arrays[key]
    moved = [k for k in arrays if k.startswith(prefix) and k.endswith(_OLD)]
    for key in moved:
        name = key[len(prefix):-len(_OLD)] + _NEW
        arrays[prefix + name] = _transposed(arrays.pop(key))
        if name in param_names:
            i = list(param_names).index(name)
            for moment in ("exp_avg", "exp_avg_sq"):
                if f"opt.{i}.{moment}" in arrays:
                    arrays[f"opt.{i}.{moment}"] = _transposed(arrays[f"opt.{i}.{moment}"])
    return moved


def _transposed(a):
    a = np.asarray(a)
    return np.ascontiguousarray(a.T) if a.ndim == 2 else a
