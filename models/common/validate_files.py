"""The checks of a whole model or checkpoint file: its header's fields and parameters, then the
kind's declared arrays (:mod:`models.common.validate`, each kind's table in ``models/<kind>/files.py``),
and for torch-trained models the network state against the architecture the header names."""
from __future__ import annotations

import os

import numpy as np

from .validate import context, first_bad, run_checks


def header_params(cls, path, header, n_terms=None):
    """The estimator built from the header's parameters, which its own parameter checks accept
    (run on the smallest corpus over the model's vocabulary, as they would before training)."""
    from .corpus import make_corpus

    path = os.fspath(path)
    params = header.get("params")
    if not isinstance(params, dict):
        raise ValueError(f"{path}: header has no parameters; retrain or restore the file")
    try:
        model = cls._from_params(params)
    except TypeError as e:
        raise ValueError(f"{path}: header parameters do not fit {cls.__name__} ({e})") from None
    if n_terms is None:
        n_terms = header.get("n_terms")
    if isinstance(n_terms, bool) or not isinstance(n_terms, int) or n_terms < 1:
        raise ValueError(f"{path}: header n_terms is {n_terms!r}, not a vocabulary size >= 1")
    probe = make_corpus(np.array([0, 1, 2]), np.zeros(2, dtype=np.int32), n_terms=n_terms,
                        fingerprint="probe")
    try:
        model._check_params(probe)
    except (ValueError, TypeError, OverflowError) as e:
        raise ValueError(f"{path}: header parameter refused: {e}") from None
    return model


def header_int(path, header, key, low=0, high=None):
    v = header.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v < low or (high is not None and v > high):
        rng = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{os.fspath(path)}: header {key} is {v!r}, not an int {rng}")
    return v


# -- the files of Gibbs-sampled models (models.common.gibbs) -------------------------------------------

def _gibbs_header(path, header, model):
    """Dimensions a Gibbs model file's header gives, once its own fields are sound."""
    n_samples = header_int(path, header, "n_samples", 1)
    header_int(path, header, "n_iter", 1)
    _sample_iter(path, header, n_samples)
    _log_lik_header(path, header)
    return dict(chains=model.n_chains, samples=model.n_chains * n_samples,
                terms=header_int(path, header, "n_terms", 1), topics=int(model.n_topics))


def _sample_iter(path, header, n_samples):
    it = header.get("sample_iter")
    if (not isinstance(it, list) or len(it) != n_samples
            or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in it)):
        raise ValueError(f"{os.fspath(path)}: header sample_iter is not a list of the "
                         f"{n_samples} kept samples' iterations")


def _log_lik_header(path, header):
    ll, it = header.get("log_lik"), header.get("log_lik_iter")
    if not isinstance(ll, list) or not isinstance(it, list) or len(ll) != len(it):
        raise ValueError(f"{os.fspath(path)}: header log_lik and log_lik_iter are not two lists "
                         f"of one length")


def gibbs_model_file(cls, path, f, doc_len=None):
    """Validate a Gibbs model file (header parameters, then the kind's declared arrays, and with
    ``doc_len``, the token counts of the index's documents, those against the index); returns
    the estimator its parameters build and the dimensions found."""
    model = header_params(cls, path, f.header)
    dims = _gibbs_header(path, f.header, model)
    dims.update(cls._FILE_SPEC.dims(model, f.header, None))
    ctx = context(path, f.header, f.arrays, model, dims, collection=doc_len)
    return model, run_checks(cls._FILE_SPEC.model, ctx)


def gibbs_checkpoint(model, path, f, corpus):
    """Validate a Gibbs checkpoint for ``model`` (its layout built for ``corpus``) before its
    state reaches a kernel."""
    h, p = f.header, os.fspath(path)
    header_int(path, h, "iteration", 0, model.n_iter)
    chains, iters = h.get("sample_chain"), h.get("sample_iter")
    if not (isinstance(chains, list) and isinstance(iters, list) and len(chains) == len(iters)):
        raise ValueError(f"{p}: header sample_chain and sample_iter are not two lists of one length")
    if any(isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < model.n_chains for c in chains):
        raise ValueError(f"{p}: header sample_chain names a chain outside [0, {model.n_chains})")
    if any(isinstance(i, bool) or not isinstance(i, int) or not 0 < i <= model.n_iter for i in iters):
        raise ValueError(f"{p}: header sample_iter names a sweep outside [1, {model.n_iter}]")
    done = h["iteration"]
    want = [(c, int(i)) for i in model._sample_iters() if i <= done for c in range(model.n_chains)]
    if list(zip(chains, iters)) != want:
        raise ValueError(f"{p}: header sample_chain and sample_iter list other kept samples than the "
                         f"schedule gives up to sweep {done}; delete it to start afresh")
    hashes = h.get("sample_sha256")
    if hashes is not None and not (isinstance(hashes, list) and len(hashes) == len(chains) and all(
            isinstance(x, str) and len(x) == 64 and set(x) <= set("0123456789abcdef") for x in hashes)):
        raise ValueError(f"{p}: header sample_sha256 is not a SHA-256 of every kept sample")
    _log_lik_header(path, h)
    for key in type(model)._TRACES:
        if not isinstance(h.get(key), list):
            raise ValueError(f"{p}: header {key} is not a list")
    inline = [n for n in model._STATE if "sample_" + n in f.arrays]
    if hashes is not None and inline:
        raise ValueError(f"{p}: holds kept samples both as files and as arrays; delete it to start afresh")
    if hashes is None and chains and len(inline) < len(model._STATE):
        raise ValueError(f"{p}: damaged or incomplete file (the header lists {len(chains)} kept "
                         f"samples, the arrays none); delete it to start afresh")
    dims = _checkpoint_dims(model, h, corpus, len(chains))
    return run_checks(type(model)._FILE_SPEC.checkpoint, context(path, h, f.arrays, model, dims, corpus))


def _checkpoint_dims(model, header, corpus, kept):
    dims = dict(chains=model.n_chains, kept=kept, tokens=corpus.n_tokens,
                documents=corpus.n_docs, terms=corpus.n_terms, topics=int(model.n_topics),
                shards=int(getattr(model, "n_shards", 1)))
    dims.update(type(model)._FILE_SPEC.dims(model, header, corpus))
    return dims


def gibbs_kept_sample(model, path, f, corpus):
    """Validate the file of one kept sample of a Gibbs checkpoint (:mod:`models.common.kept`):
    its chain state, ``sample_<assignments>`` and ``sample_<prior>`` of one row, by the kind's
    checks of kept chain state."""
    for name in model._STATE:
        if "sample_" + name not in f.arrays:
            raise ValueError(f"{os.fspath(path)}: damaged or incomplete file (missing array "
                             f"{'sample_' + name!r}); delete the checkpoint to start afresh")
    checks = tuple(c for c in type(model)._FILE_SPEC.checkpoint if c.array.startswith("sample_"))
    dims = _checkpoint_dims(model, f.header, corpus, 1)
    return run_checks(checks, context(path, f.header, f.arrays, model, dims, corpus))


# -- the files of torch-trained models (models.common.variational) -------------------------------------

def _net_state(path, arrays, net, model, prefix="net."):
    """The file's network state against the network the header's architecture builds: the same
    entries, shapes and dtypes, finite values, and the fixed buffers the parameters give
    (``model._net_buffers()``: aviPAM's masks and prior variances) equal to them."""
    want = {prefix + k: v for k, v in net.state_dict().items()}
    have = {k for k in arrays if k.startswith(prefix)}
    extra, missing = sorted(have - set(want)), sorted(set(want) - have)
    if extra or missing:
        what = f"holds {extra[0]!r}" if extra else f"lacks {missing[0]!r}"
        raise ValueError(f"{os.fspath(path)}: the network state {what}, which the architecture in "
                         f"the header does not; the file and its parameters disagree")
    for k, t in want.items():
        a = arrays[k]
        shape = tuple(t.shape)
        if a.shape not in (shape, (1,) if shape == () else shape) or str(a.dtype) != str(t.dtype).replace("torch.", ""):
            raise ValueError(f"{os.fspath(path)}: {k} has shape {a.shape} {a.dtype}, but the "
                             f"architecture in the header needs {shape} {str(t.dtype)[6:]}")
        if a.dtype.kind == "f" and first_bad(a, lambda p: ~np.isfinite(p)) is not None:
            raise ValueError(f"{os.fspath(path)}: {k} holds a value that is not finite")
    _net_buffers(path, arrays, model, prefix)


def _net_buffers(path, arrays, model, prefix="net."):
    """The file's network buffers its parameters fix (``model._net_buffers()``: aviPAM's masks
    and prior variances) equal to them: checked without torch, so that a file whose parameters
    disagree with its network is refused when it loads, also for ranking."""
    buffers = model._net_buffers()
    for k in (k for k in arrays if k.startswith(prefix)):
        fixed = buffers.get(k.rsplit(".", 1)[-1])  # every chain's network has the same
        if fixed is None:
            continue
        a = arrays[k]
        if a.size != fixed.size or not np.allclose(a.reshape(fixed.shape).astype(np.float64), fixed, rtol=1e-5, atol=0):
            raise ValueError(f"{os.fspath(path)}: {k} is not what the header's architecture and "
                             f"priors give; the file and its parameters disagree")


def variational_model_file(cls, path, f, doc_len=None):
    """Validate a torch model file: header parameters, the declared arrays (against the index's
    documents' token counts ``doc_len`` where given) and the network's buffers the parameters
    fix. The rest of its network state is checked by :func:`variational_net_state` when the
    network is first built (ranking reads none of it)."""
    model = header_params(cls, path, f.header)
    header_int(path, f.header, "n_iter", 1)
    _sample_iter(path, f.header, 1)
    _log_lik_header(path, f.header)
    dims = dict(terms=header_int(path, f.header, "n_terms", 1), topics=int(model.n_topics))
    if "n_docs" in f.header:  # files written before the header had it: bound by their arrays
        dims["documents"] = header_int(path, f.header, "n_docs", 1)
    dims.update(cls._FILE_SPEC.dims(model, f.header, None))
    dims = run_checks(cls._FILE_SPEC.model, context(path, f.header, f.arrays, model, dims, collection=doc_len))
    _net_buffers(path, f.arrays, model)
    return model, dims


def variational_net_state(model, path, arrays):
    """The network state ``arrays`` (``net.`` names) of the model file ``path`` against the
    network that ``model``'s checked parameters build."""
    import torch

    try:
        with torch.device("meta"):  # shapes only: a header asking for a huge layer allocates nothing
            net = model._build_net(model.n_terms_)
    except RuntimeError as e:  # sizes beyond what torch can even describe
        raise ValueError(f"{os.fspath(path)}: the network the header's parameters describe cannot "
                         f"be built ({str(e).splitlines()[0]})") from None
    _net_state(path, arrays, net, model)


def variational_checkpoint(model, path, f, net, opt, generators):
    """Validate a torch checkpoint for ``model``'s network ``net``, optimizer ``opt`` (both
    built from the parameters) and random ``generators`` (name -> torch.Generator)."""
    p = os.fspath(path)
    header_int(path, f.header, "iteration", 0, model.epochs)
    _log_lik_header(path, f.header)
    _net_state(path, f.arrays, net, model)
    params = list(net.parameters())
    for key, a in f.arrays.items():
        if not key.startswith("opt."):
            continue
        _, i, k = (key.split(".", 2) + ["", ""])[:3]
        if not i.isdigit() or int(i) >= len(params) or k not in ("step", "exp_avg", "exp_avg_sq"):
            raise ValueError(f"{p}: {key} is not optimizer state of this network")
        shape = (1,) if k == "step" else tuple(params[int(i)].shape)
        if a.shape not in (shape, ()) or a.dtype != np.float32:
            raise ValueError(f"{p}: {key} has shape {a.shape} {a.dtype}, the network needs {shape} float32")
        if not np.isfinite(a).all() or (k != "exp_avg" and (a < 0).any()):
            raise ValueError(f"{p}: {key} holds a value that is not finite" +
                             ("" if k == "exp_avg" else " and >= 0"))
    import torch

    for name, gen in generators.items():
        a = f.arrays.get(name)
        try:
            if a is None or a.dtype != np.uint8 or a.shape != tuple(gen.get_state().shape):
                raise RuntimeError
            torch.Generator(device=gen.device).set_state(torch.from_numpy(np.array(a)))
        except RuntimeError:
            raise ValueError(f"{p}: {name} is not the state of a random generator of this "
                             f"device") from None
