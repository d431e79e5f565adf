"""Model and checkpoint files are untrusted input (issue 30): for every registered kind, a tiny
trained model and a checkpoint taken mid-training are damaged array by array (the dtype's largest
value, a negative one, NaN, a grown pointer, the array halved with a matching manifest) and
header field by header field, and every damaged file is either refused with one line naming it,
or works: never a signal, a traceback, or a changed model in the console.

Driven by ``models.registry.kinds()`` and each kind's ``quick_params``, so a new kind is fuzzed
by registering. Model files are loaded in-process (validation refuses them before any kernel
runs); what is accepted, and every resumed training, runs in a subprocess per kind, so that a
crash fails the test instead of killing pytest; a few ``topicir run`` and ``topicir train``
calls per kind check the command line end to end.
"""
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from models.common import checkpoint as ck
from models.common import kept
from models import registry
from tests.helpers import Killed
from tests.test_conformance import THEMES, wordnet_for_tree_lda  # noqa: F401 (autouse fixture)

ROOT = Path(__file__).resolve().parents[1]
KINDS = registry.kinds()
_FORMAT_KEYS = ("format", "format_version", "topicir_version", "arrays")


@pytest.fixture(scope="module")
def collection(tmp_path_factory):
    from retrieval.core.index import build_index

    root = tmp_path_factory.mktemp("fuzz")
    rng = np.random.default_rng(1)
    words = [t.split() for t in THEMES]
    docs = []
    for d in range(24):
        theme = words[d % 3]
        text = " ".join(rng.choice(theme) for _ in range(rng.integers(12, 30)))
        docs.append(f"<DOC>\n<DOCNO> F{d:03d} </DOCNO>\n<TEXT>\n{text}.\n</TEXT>\n</DOC>\n")
    (root / "docs.trec").write_text("".join(docs))
    (root / "topics.trec").write_text("<top>\n<num> Number: 1\n<title> car engine\n</top>\n"
                                      "<top>\n<num> Number: 2\n<title> river water\n</top>\n")
    return build_index([root / "docs.trec"], root / "index"), root / "topics.trec"


def _length(cls):
    return cls.quick_params.get("n_iter", cls.quick_params.get("epochs"))


@pytest.fixture(scope="module")
def trained(collection, tmp_path_factory):
    """Per kind: the model file, and a checkpoint of the same training killed at its last
    checkpoint before the end (so a resume runs sweeps on the state)."""
    from retrieval.core.modelfiles import index_corpus, train_model, training_inputs

    index, _ = collection
    cache = {}

    def get(kind):
        if kind not in cache:
            cls = registry.model_class(kind)
            d = tmp_path_factory.mktemp(f"fuzz-{kind}")
            model, path = train_model(index, kind, d / f"{kind}.npz", progress=False, **cls.quick_params)
            n = _length(cls)
            kill_at = (n - 1) // 2 * 2

            def kill(m, it, total):
                if it == kill_at:
                    raise Killed
            ckpt = d / f"{kind}.ckpt"
            est = cls(**dict(cls.quick_params, checkpoint_every=2))
            with pytest.raises(Killed):
                est.fit(index_corpus(index), callback=kill, checkpoint=ckpt,
                        **training_inputs(index, est, False))
            cache[kind] = model, path, ckpt
        return cache[kind]
    return get


# -- the mutations -----------------------------------------------------------------------------

def array_mutations(arrays):
    """(label, name, mutated array) for every array: the dtype's largest value, a negative one,
    NaN and infinity for floats, a grown pointer, the array halved."""
    for name, a in arrays.items():
        if name == "__header__" or a.size == 0 or a.dtype == bool:
            continue
        mid = a.size // 2
        values = []
        if a.dtype.kind in "iu":
            values += [("max", np.iinfo(a.dtype).max)]
            if a.dtype.kind == "i":
                values += [("negative", -1), ("min", np.iinfo(a.dtype).min)]
        elif a.dtype.kind == "f":
            values += [("nan", np.nan), ("negative", -1.0), ("inf", np.inf)]
        for label, v in values:
            b = a.copy()
            b.flat[mid] = v
            yield f"{name}={label}", name, b
        if name.endswith("_ptr") and a.dtype.kind in "iu":
            b = a.copy()
            b.flat[-1] += 1
            yield f"{name}=grown", name, b
        if a.ndim and a.shape[0] > 1:
            yield f"{name}=halved", name, a[: a.shape[0] // 2].copy()


def _changed(v):
    """Other values of a header parameter: out of range, NaN, finite but absurd, another size,
    another type."""
    if isinstance(v, bool):
        return [not v, "yes"]
    if isinstance(v, int):
        return [-1, 0, v + 1, 2 ** 40, "7"]
    if isinstance(v, float):
        return [-v if v else -1.0, math.nan, math.inf, 0.0, v * 2, 1e307]
    if v is None:
        return [-1.0, math.nan, 3]
    if isinstance(v, str):
        return ["bogus", ""]
    return [None]


def header_mutations(header, keys):
    """(label, mutated header) for every parameter and the given header fields."""
    for k, v in header["params"].items():
        for new in _changed(v):
            yield f"params.{k}={new!r}", dict(header, params=dict(header["params"], **{k: new}))
    for k in keys:
        if k in header:
            for new in _changed(header[k]) + ([[]] if isinstance(header[k], list) else []):
                yield f"{k}={new!r}", dict(header, **{k: new})


def write_mutants(src, out_dir, kind, header_keys):
    """Damaged copies of ``src``; a checkpoint's with a copy of its kept samples' files each."""
    f = ck.read_model_file(src, kind=kind)
    header = {k: v for k, v in f.header.items() if k not in _FORMAT_KEYS}
    out = []
    for i, (label, name, b) in enumerate(array_mutations(f.arrays)):
        p = out_dir / f"a{i}.npz"
        ck.write_model_file(p, header, dict(f.arrays, **{name: b}), kind=kind)
        out.append((label, p))
    for i, (label, h) in enumerate(header_mutations(header, header_keys)):
        p = out_dir / f"h{i}.npz"
        ck.write_model_file(p, h, f.arrays, kind=kind)
        out.append((label, p))
    if kept.kept_dir(src).is_dir():
        for _, p in out:
            shutil.copytree(kept.kept_dir(src), kept.kept_dir(p))
    return out


def one_line_refusal(exc, path):
    msg = str(exc)
    return "\n" not in msg and msg.startswith(f"{path}: ")


# -- a subprocess that runs kernels on what validation let through ------------------------------

_WORKER = r"""
import json, sys
import numpy as np
from models import registry
from retrieval.core.index import Index
from retrieval.core.modelfiles import index_corpus, load_model, training_inputs
kind, index_path, jobs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
index = Index(index_path)
corpus, cls = index_corpus(index), registry.model_class(kind)
V, D = index.stats.n_terms, index.stats.n_docs
params = dict(cls.quick_params, checkpoint_every=2)
# the same for every resume (one index, one setting): tree-LDA's reads WordNet
inputs = training_inputs(index, cls(**params), False)
for mode, path in jobs:
    print("START", path, flush=True)
    try:
        if mode == "score":
            m = load_model(path, index)
            p = m.p_w_d(np.arange(V))
            m.doc_topics(0, top=3)
            m.topic_words(0, top=3)
            ok = p.shape == (D, V) and bool(np.isfinite(p).all())
            res = "ok" if ok else f"bad scores {p.shape} finite={np.isfinite(p).all()}"
        else:
            cls(**params).fit(corpus, checkpoint=path, **inputs)
            res = "ok"
    except ValueError as e:
        res = "error: " + str(e)
    except Exception as e:
        res = f"UNEXPECTED {type(e).__name__}: {e}"
    print("RESULT", json.dumps([path, res]), flush=True)
"""


def run_worker(kind, index, jobs):
    """Run ``jobs`` [(mode, path)] in one subprocess; returns {path: result} and the process."""
    proc = subprocess.run([sys.executable, "-c", _WORKER, kind, str(index.path), json.dumps(jobs)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    results, last = {}, None
    for line in proc.stdout.splitlines():
        if line.startswith("START "):
            last = line[6:]
        elif line.startswith("RESULT "):
            path, res = json.loads(line[7:])
            results[path] = res
    assert proc.returncode == 0, (f"{kind}: worker died with {proc.returncode} on {last}: "
                                  f"{proc.stderr[-2000:]}")
    return results


def cli(*args, cwd):
    return subprocess.Popen([sys.executable, "-m", "retrieval", *map(str, args)], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})


def train_args(kind, out, index):
    from retrieval.ui.estimator_args import flag_of

    cls = registry.model_class(kind)
    args = ["train", kind, "--index", index.path, "--out", out, "-q"]
    for k, v in dict(cls.quick_params, checkpoint_every=2).items():
        if isinstance(v, bool):
            args.append(flag_of(k) if v else "--no-" + flag_of(k)[2:])
        else:
            args += [flag_of(k), v]
    return args


# -- the test ----------------------------------------------------------------------------------

# aviPAM's command lines start torch: make test-long
@pytest.mark.parametrize("kind", [pytest.param(k, marks=pytest.mark.long) if k == "avipam" else k for k in KINDS])
def test_damaged_files_are_refused_in_one_line_or_work(kind, collection, trained, tmp_path):
    from retrieval.core.modelfiles import load_model
    from retrieval.ui.console import Session

    index, topics = collection
    model, path, ckpt = trained(kind)
    cls = registry.model_class(kind)
    assert getattr(cls, "_FILE_SPEC", None) is not None, f"{kind} declares no _FILE_SPEC"
    (tmp_path / "m").mkdir()
    (tmp_path / "c").mkdir()
    mutants = write_mutants(path, tmp_path / "m", ck.MODEL_FORMAT,
                            ("n_terms", "n_samples", "n_iter", "sample_iter", "log_lik", "alpha_used"))
    ck_mutants = write_mutants(ckpt, tmp_path / "c", ck.CHECKPOINT_FORMAT,
                               ("iteration", "sample_chain", "sample_iter", "sample_sha256", "log_lik"))
    assert len(mutants) > 20 and len(ck_mutants) > 10

    # model files: loaded in-process, then through the console's :model
    session = Session(index, model=model, model_name="good")
    accepted, refused = [], []
    for label, p in mutants:
        try:
            loaded = load_model(p, index)
        except ValueError as e:
            assert one_line_refusal(e, p), (kind, label, str(e))
            out = "".join(text for _, text in session.execute(f":model {p}"))
            assert out.startswith("error: ") and str(p) in out and out.count("\n") == 1, (kind, label, out)
            assert session.model is model and session.model_name == "good", (kind, label)
            refused.append((label, p))
            continue
        try:  # a torch kind's network (its arrays, and the parameters that shape it only) is
            getattr(loaded, "net_", None)  # checked when first built: ranking never reads it
        except ValueError as e:
            assert label.startswith(("net.", "params.")), (kind, label, str(e))
            assert one_line_refusal(e, p), (kind, label, str(e))
            refused.append((label, p))
        else:
            accepted.append(("score", str(p)))
    # every out-of-range value of an index, pointer or count array is refused
    assert len(refused) >= len(mutants) // 2, (kind, len(refused), len(mutants))

    # command lines, started now to run beside the worker: `run` with a damaged model, and
    # `train` resuming a damaged checkpoint
    bad_model = next(p for label, p in refused if not label.startswith(("params.", "n_", "net.")))
    bad_header = next(p for label, p in refused if label.startswith("params."))
    out = tmp_path / "cli" / "model.npz"
    out.parent.mkdir()
    bad_ckpt = next(p for label, p in ck_mutants if label.endswith(("=max", "=nan")))
    Path(str(out) + ".ckpt").write_bytes(bad_ckpt.read_bytes())
    procs = [(p, cli("run", "--index", index.path, "--topics", topics, "--model", p,
                     "--out-dir", tmp_path / "runs", cwd=tmp_path)) for p in (bad_model, bad_header)]
    procs.append((Path(str(out) + ".ckpt"), cli(*train_args(kind, out, index), cwd=tmp_path)))

    # what validation let through, and every checkpoint, in a subprocess
    jobs = accepted + [("resume", str(p)) for _, p in ck_mutants]
    results = run_worker(kind, index, jobs)
    labels = {str(p): label for label, p in mutants + ck_mutants}
    for mode, p in jobs:
        res = results.get(p)
        assert res is not None and not res.startswith("UNEXPECTED"), (kind, labels[p], res)
        if res != "ok":
            assert res.startswith(f"error: {p}: ") and "\n" not in res, (kind, labels[p], res)
        elif mode == "score":
            pass  # a damaged header field or value the model does not depend on

    assert results[str(bad_ckpt)] != "ok", (kind, labels[str(bad_ckpt)])
    for p, proc in procs:
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 2, (kind, p, proc.returncode, stderr)
        assert stderr.count("\n") == 1 and str(p) in stderr and "Traceback" not in stderr, (kind, stderr)
    assert not list(tmp_path.glob("hs_err_pid*.log"))
    assert not out.exists()
    assert not [q for q in (tmp_path / "cli").iterdir() if q.name.startswith(".") and
                not q.name.endswith(".lock")], "a temporary was left"


# -- every declared relation, broken alone ------------------------------------------------------

def _damaged(ctx, check, out, kind):
    """Write the file of ``ctx`` with ``check``'s damage to ``out``; returns the index's document
    lengths to load it against (the damage may change those instead of the file)."""
    change = check.damage(ctx)
    collection = change.pop("collection", ctx.collection)
    header = {k: v for k, v in change.pop("header", ctx.header).items() if k not in _FORMAT_KEYS}
    ck.write_model_file(out, header, dict(ctx.arrays, **change), kind=kind)
    return collection


def _refused_by(check, exc, path):
    """``exc`` is ``check``'s refusal of ``path``: one line naming the file and the array."""
    from models.common.validate import FileRefused

    assert isinstance(exc, FileRefused) and exc.check is check, (check.text, str(exc))
    assert one_line_refusal(exc, path) and check.array in str(exc), (check.text, str(exc))


def _checkpoint_context(kind, index, ckpt, check="gibbs_checkpoint"):
    """The context a resume of ``ckpt`` validates (the estimator with its layout for the corpus),
    caught at validation, before any kernel reads the checkpoint; with ``check`` =
    "gibbs_kept_sample", that of its first kept sample's file."""
    from models.common import validate as V
    from models.common import validate_files
    from retrieval.core.modelfiles import index_corpus, training_inputs

    cls = registry.model_class(kind)
    est = cls(**dict(cls.quick_params, checkpoint_every=2))
    corpus, seen = index_corpus(index), {}
    real = getattr(validate_files, check)

    def spy(model, path, f, corpus):
        seen["ctx"] = V.context(path, f.header, f.arrays, model, real(model, path, f, corpus), corpus)
        raise Killed
    setattr(validate_files, check, spy)
    try:
        with pytest.raises(Killed):
            est.fit(corpus, checkpoint=ckpt, **training_inputs(index, est, False))
    finally:
        setattr(validate_files, check, real)
    return seen["ctx"], corpus


def _damaged_kept_sample(ctx, check, ckpt, out):
    """A copy ``out`` of ``ckpt`` and its kept samples whose first kept sample (the file of
    ``ctx``) has ``check``'s damage, its hash listed anew: a consistent but bad pair. Returns the
    damaged file."""
    out.parent.mkdir()
    shutil.copytree(kept.kept_dir(ckpt), kept.kept_dir(out))
    arrays = dict(ctx.arrays, **check.damage(ctx))
    side = kept.kept_dir(out) / Path(ctx.path).name
    ck.write_model_file(side, {k: v for k, v in ctx.header.items() if k not in _FORMAT_KEYS}, arrays,
                        kind=ck.CHECKPOINT_FORMAT)
    f = ck.read_model_file(ckpt, kind=ck.CHECKPOINT_FORMAT)
    header = {k: v for k, v in f.header.items() if k not in _FORMAT_KEYS}
    header["sample_sha256"] = [kept.digest(arrays)] + header["sample_sha256"][1:]
    ck.write_model_file(out, header, f.arrays, kind=ck.CHECKPOINT_FORMAT)
    return side


@pytest.mark.parametrize("kind", KINDS)
def test_every_declared_relation_is_refused_alone(kind, collection, trained, tmp_path):
    """For every check of the kind's file spec that relates values (bounds, pointers, order,
    totals across arrays, row sums, priors, the index's documents), a sound file damaged so that
    this check breaks and none before it is refused by exactly that check, in one line naming
    the file and the array; so is a checkpoint, before the resume's first sweep; a header prior
    out of bounds is refused too."""
    from models.common import validate as V
    from models.common import validate_files
    from retrieval.core.modelfiles import doc_lengths, load_model

    index, _ = collection
    _, path, ckpt = trained(kind)
    cls = registry.model_class(kind)
    spec = cls._FILE_SPEC
    # every check but an array's shape and dtype says how to break it
    for c in spec.model + spec.checkpoint:
        assert (c.damage is None) == c.text.startswith("shape ("), (kind, c.array, c.text)

    f = ck.read_model_file(path)
    validate_file = (validate_files.gibbs_model_file if spec.checkpoint
                     else validate_files.variational_model_file)
    model, dims = validate_file(cls, path, f, doc_lengths(index))
    ctx = V.context(path, f.header, f.arrays, model, dims, collection=doc_lengths(index))
    V.run_checks(spec.model, ctx)  # the sound file passes; the damages read what its checks found
    broken = 0
    for i, check in enumerate(spec.model):
        if check.damage is None or not V.applies(check, ctx):
            continue
        bad = tmp_path / f"m{i}.npz"
        docs = _damaged(ctx, check, bad, ck.MODEL_FORMAT)
        with pytest.raises(ValueError) as info:
            registry.load(bad, fingerprint=index.fingerprint, doc_len=docs)
        _refused_by(check, info.value, bad)
        if docs is ctx.collection:  # the file alone is damaged: the ranker's load refuses it too
            with pytest.raises(ValueError) as info:
                load_model(bad, index)
            _refused_by(check, info.value, bad)
        broken += 1
    assert broken >= 5, (kind, broken)

    # the priors among the header's parameters
    for name, _ in spec.priors:
        bad = tmp_path / f"p-{name}.npz"
        header = {k: v for k, v in f.header.items() if k not in _FORMAT_KEYS}
        ck.write_model_file(bad, dict(header, params=dict(header["params"], **{name: V.ABSURD})), f.arrays)
        with pytest.raises(ValueError, match=rf"^{bad}: header parameter refused: {name} must be a "
                                             rf"number in \[1e-10, 1e\+10\]"):
            load_model(bad, index)

    if not spec.checkpoint:
        return
    ctx, corpus = _checkpoint_context(kind, index, ckpt)
    jobs = []
    for i, check in enumerate(spec.checkpoint):
        if check.damage is None or not V.applies(check, ctx):
            continue
        bad = tmp_path / f"c{i}.ckpt"
        _damaged(ctx, check, bad, ck.CHECKPOINT_FORMAT)
        with pytest.raises(ValueError) as info:
            validate_files.gibbs_checkpoint(ctx.model, bad, ck.read_model_file(bad, ck.CHECKPOINT_FORMAT), corpus)
        _refused_by(check, info.value, bad)
        jobs.append(("resume", str(bad)))
    # the checks of kept chain state, on the file of a kept sample the checkpoint lists
    kctx, _ = _checkpoint_context(kind, index, ckpt, "gibbs_kept_sample")
    named = {}
    for i, check in enumerate(spec.checkpoint):
        if not check.array.startswith("sample_") or check.damage is None or not V.applies(check, kctx):
            continue
        bad = tmp_path / f"k{i}" / "m.ckpt"
        side = _damaged_kept_sample(kctx, check, ckpt, bad)
        with pytest.raises(ValueError) as info:
            validate_files.gibbs_kept_sample(kctx.model, side, ck.read_model_file(side, ck.CHECKPOINT_FORMAT), corpus)
        _refused_by(check, info.value, side)
        jobs.append(("resume", str(bad)))
        named[str(bad)] = side
    assert len(jobs) >= 5 and named, (kind, jobs)
    # and a resume refuses every one of them before its first sweep (in a subprocess: no kernel
    # may run on them)
    for p, res in run_worker(kind, index, jobs).items():
        assert res.startswith(f"error: {named.get(p, p)}: ") and "\n" not in res, (kind, p, res)


@pytest.mark.parametrize("check_of", ["gibbs_checkpoint", "gibbs_kept_sample"])
def test_tree_lda_path_ids_of_older_checkpoints_are_refused_alone_when_off_their_words(
        check_of, collection, trained, tmp_path):
    """tree-LDA's checkpoints and kept samples hold every token's path as a uint16 rank among its
    word's paths (what the test above damages); a file of the int32 path ids written before,
    sound, passes, and with a path off its word (the path check's damage for that form) is
    refused by exactly that check."""
    from models.common import validate as V
    from models.common import validate_files

    index, _ = collection
    ctx, corpus = _checkpoint_context("tree-lda", index, trained("tree-lda")[2], check_of)
    name = "zzp" if check_of == "gibbs_checkpoint" else "sample_zzp"
    N, ptr = corpus.n_tokens, ctx.model.tree_.word_path_ptr
    zzp = np.asarray(ctx.arrays[name])
    assert zzp.dtype == np.uint16
    ids = np.concatenate([zzp[:, :N], zzp[:, N:] + ptr[corpus.term_ids]], axis=1).astype(np.int32)
    ctx = V.context(ctx.path, ctx.header, dict(ctx.arrays, **{name: ids}), ctx.model, ctx.dims, corpus)
    spec = registry.model_class("tree-lda")._FILE_SPEC.checkpoint
    checks = [c for c in spec if c.array == name and c.damage is not None]
    assert len(checks) == 1
    good, bad = tmp_path / "good.npz", tmp_path / "bad.npz"
    ck.write_model_file(good, {k: v for k, v in ctx.header.items() if k not in _FORMAT_KEYS}, ctx.arrays,
                        kind=ck.CHECKPOINT_FORMAT)
    validate = getattr(validate_files, check_of)
    validate(ctx.model, good, ck.read_model_file(good, ck.CHECKPOINT_FORMAT), corpus)
    _damaged(ctx, checks[0], bad, ck.CHECKPOINT_FORMAT)
    with pytest.raises(ValueError) as info:
        validate(ctx.model, bad, ck.read_model_file(bad, ck.CHECKPOINT_FORMAT), corpus)
    _refused_by(checks[0], info.value, bad)
    assert "holds path -1, not a path of its token's word" in str(info.value)


@pytest.mark.parametrize("kind", ["lda", "pam", "tcm", "avipam"])
def test_a_model_of_fewer_documents_than_the_index_is_refused(kind, collection, tmp_path):
    """Issue 59: a file whose document tables hold one document fewer than the index, its header
    untouched (the index's fingerprint), was ranked reading past its arrays; now the ranker's
    load, `run` and the console refuse it in one line naming the file."""
    from models.common.corpus import make_corpus
    from retrieval.core.modelfiles import index_corpus, load_model, training_inputs
    from retrieval.ui.console import Session

    index, topics = collection
    cls = registry.model_class(kind)
    full = index_corpus(index)
    n = int(full.doc_ptr[-2])  # the tokens of every document but the last
    short = make_corpus(full.doc_ptr[:-1], full.term_ids[:n], n_terms=full.n_terms,
                        fingerprint=full.fingerprint)
    est = cls(**cls.quick_params)
    inputs = {k: v[:n] if len(v) == full.n_tokens else v
              for k, v in training_inputs(index, est, False).items()}
    path = tmp_path / f"{kind}.npz"
    est.fit(short, **inputs).save(path)
    with pytest.raises(ValueError) as info:
        load_model(path, index)
    want = f"describes {full.n_docs - 1} documents, but the index has {full.n_docs}; not a model of this index"
    assert one_line_refusal(info.value, path) and want in str(info.value), str(info.value)
    out = "".join(text for _, text in Session(index).execute(f":model {path}"))
    assert out.startswith("error: ") and want in out and out.count("\n") == 1, out
    proc = cli("run", "--index", index.path, "--topics", topics, "--model", path,
               "--out-dir", tmp_path / "runs", cwd=tmp_path)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 2 and err.count("\n") == 1 and want in err, err
