"""Checkpoints at scale (issue 61): a checkpoint writes the chains' live state and the kept
samples taken since the one before, each kept sample once to a file of its own; resuming from
them is bit-identical, a kept sample's file is untrusted input like the checkpoint, and a
training reports the bytes its checkpoints wrote."""
import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from models import registry, synthetic_corpus
from models.common import checkpoint as ck
from models.common import kept
from models.common import validate as V
from models.common import validate_files
from models.common.gibbs import GibbsModel
from models.tree_lda.tree import build_tree
from tests.helpers import Killed

DATA = Path(__file__).parent / "data"
_FORMAT_KEYS = ("format", "format_version", "topicir_version", "arrays")
KINDS = [k for k in registry.kinds() if issubclass(registry.model_class(k), GibbsModel)]
SYN = [[0, 1, 2], [1, 3], [4, 5], [2, 6, 7], [8, 8]]
# 12 sweeps, samples after sweeps 6, 8, 10 and 12, checkpoints after 3, 6, 9 and 12
SCHEDULE = dict(n_chains=2, n_iter=12, burn_in=4, sample_every=2, seed=3, checkpoint_every=3,
                log_lik_every=2)


def setup(kind, **kw):
    """(class, parameters, corpus, fit inputs) of a small training of ``kind``."""
    cls = registry.model_class(kind)
    corpus = synthetic_corpus(40, 30, 14, seed=2, n_latent=3)
    size = dict(n_super=2, n_sub=3) if kind == "pam" else dict(n_topics=3)
    params = dict(SCHEDULE, **size, **kw)
    if "n_shards" in cls._param_names():
        params["n_shards"] = 2
    inputs = {}
    if kind == "tcm":
        inputs["split"] = (np.random.default_rng(2).random(corpus.n_tokens) < 0.25).astype(np.uint8)
    if kind == "tree-lda":
        inputs["synsets"] = SYN
    return cls, params, corpus, inputs


def killed_after(cls, params, corpus, inputs, path, sweep):
    def kill(model, it, n_iter):
        if it == sweep:
            raise Killed
    with pytest.raises(Killed):
        cls(**params).fit(corpus, callback=kill, checkpoint=path, **inputs)


def assert_same_model(got, want):
    """Every array the model keeps and its chains' state, bit for bit."""
    cls = type(want)
    names = [n + "_" for n in cls._INFERENCE_ARRAYS + cls._STATE] + ["rng_", "log_lik_", "log_lik_iter_",
                                                                   "sample_iter_"]
    for name in names + list(cls._TRACES.values()):
        np.testing.assert_array_equal(np.asarray(getattr(got, name)), np.asarray(getattr(want, name)), err_msg=name)


def sidecars(path):
    return sorted(p.name for p in kept.kept_dir(path).iterdir())


@pytest.mark.parametrize("kind", KINDS)
def test_resume_after_kept_samples_equals_the_uninterrupted_run(kind, tmp_path):
    cls, params, corpus, inputs = setup(kind)
    full = cls(**params).fit(corpus, **inputs)
    path = tmp_path / "m.ckpt"
    killed_after(cls, params, corpus, inputs, path, 10)
    # the checkpoint after sweep 9 lists the samples of sweeps 6 and 8 and holds none of them;
    # the samples of sweep 10 have their files already, listed by no checkpoint yet
    f = ck.read_model_file(path, kind=ck.CHECKPOINT_FORMAT)
    assert f.header["iteration"] == 9
    assert list(zip(f.header["sample_chain"], f.header["sample_iter"])) == [(0, 6), (1, 6), (0, 8), (1, 8)]
    assert not [a for a in f.arrays if a.startswith("sample_")]
    assert sidecars(path) == [f"chain{c}.sweep{i}.npz" for c in (0, 1) for i in (10, 6, 8)]
    resumed = cls(**dict(params, n_jobs=1)).fit(corpus, checkpoint=path, **inputs)
    assert_same_model(resumed, full)
    # the resumed run wrote one checkpoint: its live state and the samples of sweeps 10 and 12
    files = [kept.kept_path(path, c, i).stat().st_size for c in (0, 1) for i in (10, 12)]
    np.testing.assert_array_equal(resumed.checkpoint_writes_, [[12, path.stat().st_size + sum(files)]])
    # and a second resume, at the end, reads every kept sample back to the same model
    assert_same_model(cls(**params).fit(corpus, checkpoint=path, **inputs), full)


def test_a_checkpoint_writes_what_changed_since_the_one_before(tmp_path):
    """Each kept sample is written once; the checkpoint file keeps its size while samples
    accumulate; checkpoint_writes_ counts exactly the bytes of the files written."""
    cls, params, corpus, inputs = setup("lda")
    path = tmp_path / "m.ckpt"
    seen, sizes = {}, []

    def record(model, it, n_iter):
        for p in kept.kept_dir(path).glob("*.npz"):
            st = p.stat()
            assert seen.setdefault(p.name, (st.st_ino, st.st_mtime_ns)) == (st.st_ino, st.st_mtime_ns), p
        if it % 3 == 0:
            sizes.append((it, path.stat().st_size, dict(seen)))

    m = cls(**dict(params, callback_every=1)).fit(corpus, callback=record, checkpoint=path)
    assert len(seen) == 8  # 2 chains x 4 samples, each written once
    ckpt_sizes = [s for _, s, _ in sizes]
    assert max(ckpt_sizes) - min(ckpt_sizes) < 1024  # its header's traces grow, nothing else
    sample_size = kept.kept_path(path, 0, 6).stat().st_size
    assert sample_size > 2 * corpus.n_tokens  # the assignments, uint16
    want, before = [], set()
    for it, size, files in sizes:
        new = set(files) - before
        want.append([it, size + sum((kept.kept_dir(path) / n).stat().st_size for n in new)])
        before |= set(files)
    np.testing.assert_array_equal(m.checkpoint_writes_, want)
    assert [n for n, _ in want] == [3, 6, 9, 12] and want[0][1] == ckpt_sizes[0]
    assert m.checkpoint_bytes_ == sum(b for _, b in want)
    plain = cls(**params).fit(corpus)
    assert plain.checkpoint_bytes_ == 0 and plain.checkpoint_writes_.shape == (0, 2)


def _copy(path, to):
    to.parent.mkdir()
    shutil.copy(path, to)
    shutil.copytree(kept.kept_dir(path), kept.kept_dir(to))
    return to


def _one_line(exc, start):
    msg = str(exc)
    assert "\n" not in msg and msg.startswith(f"{start}: "), msg
    return msg


def test_a_missing_damaged_or_foreign_kept_sample_is_refused_in_one_line(tmp_path):
    cls, params, corpus, inputs = setup("lda")
    path = tmp_path / "run" / "m.ckpt"
    killed_after(cls, params, corpus, inputs, path, 10)
    other = tmp_path / "other" / "m.ckpt"
    killed_after(cls, dict(params, seed=4), corpus, inputs, other, 10)

    def resume(p):
        with pytest.raises(ValueError) as info:
            cls(**params).fit(corpus, callback=lambda *a: pytest.fail("a sweep ran"), checkpoint=p)
        return info.value

    p = _copy(path, tmp_path / "missing" / "m.ckpt")
    kept.kept_path(p, 1, 8).unlink()
    msg = _one_line(resume(p), p)
    assert f"lists a kept sample {kept.kept_path(p, 1, 8)} that is missing" in msg
    p = _copy(path, tmp_path / "moved" / "n.ckpt")  # the checkpoint renamed without its directory
    shutil.move(kept.kept_dir(p), kept.kept_dir(p.with_name("m.ckpt")))
    assert "moves with its directory n.ckpt.kept" in _one_line(resume(p), p)

    p = _copy(path, tmp_path / "truncated" / "m.ckpt")
    side = kept.kept_path(p, 0, 6)
    side.write_bytes(side.read_bytes()[:200])
    assert "truncated/corrupt" in _one_line(resume(p), side)

    p = _copy(path, tmp_path / "foreign" / "m.ckpt")
    side = kept.kept_path(p, 1, 8)
    shutil.copy(kept.kept_path(other, 1, 8), side)  # the same sample of a run with another seed
    assert "not the kept sample checkpoint" in _one_line(resume(p), side)

    p = _copy(path, tmp_path / "swapped" / "m.ckpt")
    side = kept.kept_path(p, 1, 8)
    shutil.copy(kept.kept_path(p, 0, 8), side)
    assert "holds chain 0 at sweep 8, not chain 1 at sweep 8" in _one_line(resume(p), side)

    p = _copy(path, tmp_path / "not-a-sample" / "m.ckpt")
    side = kept.kept_path(p, 0, 6)
    shutil.copy(p, side)  # the checkpoint itself where a sample belongs
    assert "not a kept sample of a checkpoint" in _one_line(resume(p), side)

    p = _copy(path, tmp_path / "another-corpus" / "m.ckpt")
    side = kept.kept_path(p, 0, 6)
    f = ck.read_model_file(side, kind=ck.CHECKPOINT_FORMAT)
    ck.write_model_file(side, dict({k: v for k, v in f.header.items() if k not in _FORMAT_KEYS},
                                   fingerprint="another"), f.arrays, kind=ck.CHECKPOINT_FORMAT)
    assert "fingerprint 'another'" in str(resume(p)) and str(side) in str(resume(p))

    # the original, untouched, resumes
    cls(**params).fit(corpus, checkpoint=path)


def _sample_context(cls, params, corpus, inputs, path):
    """The context the resume of ``path`` checks its first kept sample's file in."""
    real = validate_files.gibbs_kept_sample
    seen = {}

    def spy(model, p, f, corpus):
        dims = real(model, p, f, corpus)
        seen["ctx"] = V.context(p, f.header, f.arrays, model, dims, corpus)
        raise Killed
    validate_files.gibbs_kept_sample = spy
    try:
        with pytest.raises(Killed):
            cls(**params).fit(corpus, checkpoint=path, **inputs)
    finally:
        validate_files.gibbs_kept_sample = real
    return seen["ctx"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_check_of_kept_state_refuses_a_kept_samples_file(kind, tmp_path):
    """A kept sample's file damaged so that one of the kind's checks of kept chain state breaks,
    its hash listed anew in the checkpoint (a consistent but bad pair), is refused by that check
    in one line naming the file and the array, before any sweep."""
    cls, params, corpus, inputs = setup(kind)
    path = tmp_path / "m.ckpt"
    killed_after(cls, params, corpus, inputs, path, 10)
    ctx = _sample_context(cls, params, corpus, inputs, path)
    side = Path(ctx.path)
    assert side == kept.kept_path(path, 0, 6)
    checks = [c for c in cls._FILE_SPEC.checkpoint if c.array.startswith("sample_") and c.damage is not None
              and V.applies(c, ctx)]
    assert len(checks) >= 2, kind
    header = {k: v for k, v in ctx.header.items() if k not in _FORMAT_KEYS}
    f = ck.read_model_file(path, kind=ck.CHECKPOINT_FORMAT)
    ckpt_header = {k: v for k, v in f.header.items() if k not in _FORMAT_KEYS}
    for i, check in enumerate(checks):
        p = tmp_path / f"c{i}" / "m.ckpt"
        _copy(path, p)
        arrays = dict(ctx.arrays, **check.damage(ctx))
        ck.write_model_file(kept.kept_path(p, 0, 6), header, arrays, kind=ck.CHECKPOINT_FORMAT)
        hashes = list(ckpt_header["sample_sha256"])
        hashes[0] = kept.digest(arrays)
        ck.write_model_file(p, dict(ckpt_header, sample_sha256=hashes), f.arrays, kind=ck.CHECKPOINT_FORMAT)
        with pytest.raises(V.FileRefused) as info:
            cls(**params).fit(corpus, callback=lambda *a: pytest.fail("a sweep ran"), checkpoint=p, **inputs)
        assert info.value.check is check, (kind, check.text, str(info.value))
        assert check.array in _one_line(info.value, kept.kept_path(p, 0, 6))


def test_a_fresh_start_removes_the_kept_samples_of_an_earlier_checkpoint(tmp_path):
    cls, params, corpus, inputs = setup("lda")
    path = tmp_path / "m.ckpt"
    cls(**params).fit(corpus, checkpoint=path)
    assert len(sidecars(path)) == 8
    path.unlink()  # "delete it to start afresh"
    d = kept.kept_dir(path)
    (d / ".chain0.sweep6.npz.tmp-x1y2").write_bytes(b"left by a killed writer")
    (d / "notes.txt").write_text("not ours")
    killed_after(cls, dict(params, seed=9), corpus, inputs, path, 5)  # before its first sample
    assert sidecars(path) == ["notes.txt"]
    cls(**dict(params, seed=9)).fit(corpus, checkpoint=path)
    kept.remove_checkpoint(path)
    assert not path.exists() and sidecars(path) == ["notes.txt"]
    (d / "notes.txt").unlink()
    cls(**params).fit(corpus, checkpoint=path)
    kept.remove_checkpoint(path)
    assert list(tmp_path.iterdir()) == []


def test_a_checkpoint_of_the_earlier_layout_resumes_and_gets_its_files(tmp_path):
    """Checkpoints written before kept samples had files held them as stacked arrays."""
    cls, params, corpus, inputs = setup("pam")
    full = cls(**params).fit(corpus)
    path = tmp_path / "m.ckpt"
    killed_after(cls, params, corpus, inputs, path, 10)
    f = ck.read_model_file(path, kind=ck.CHECKPOINT_FORMAT)
    h = {k: v for k, v in f.header.items() if k not in _FORMAT_KEYS + ("sample_sha256",)}
    rows = [ck.read_model_file(kept.kept_path(path, c, i), kind=ck.CHECKPOINT_FORMAT).arrays
            for c, i in zip(h["sample_chain"], h["sample_iter"])]
    arrays = dict(f.arrays, **{n: np.concatenate([r[n] for r in rows]) for n in ("sample_z", "sample_alpha")})
    ck.write_model_file(path, h, arrays, kind=ck.CHECKPOINT_FORMAT)
    kept.remove(path)
    resumed = cls(**params).fit(corpus, checkpoint=path)
    assert_same_model(resumed, full)
    assert len(sidecars(path)) == 8  # the 4 it read, and the 4 it took
    assert "sample_z" not in ck.read_model_file(path, kind=ck.CHECKPOINT_FORMAT).arrays
    assert_same_model(cls(**params).fit(corpus, checkpoint=path), full)


def test_train_logs_its_checkpoint_writes_and_leaves_only_the_model(tmp_path, caplog):
    from retrieval.core.index import build_index
    from retrieval.core.modelfiles import train_model

    index = build_index([DATA / "docs.trec"], tmp_path / "mini")
    out = tmp_path / "models" / "lda.npz"
    params = dict(n_topics=3, n_chains=2, n_iter=12, burn_in=4, sample_every=2, checkpoint_every=3)
    with caplog.at_level(logging.INFO, logger="retrieval.core.modelfiles"):
        model, _ = train_model(index, "lda", out, progress=False, **params)
    line = [r.getMessage() for r in caplog.records if r.getMessage().startswith("checkpoints wrote")]
    w = model.checkpoint_writes_
    assert w[:, 0].tolist() == [3, 6, 9, 12] and model.checkpoint_bytes_ == w[:, 1].sum()
    assert line == [f"checkpoints wrote {model.checkpoint_bytes_ / 2**20:.1f} MiB to disk: 4 checkpoints, "
                    f"the last {w[-1, 1] / 2**20:.1f} MiB"]
    assert sorted(p.name for p in out.parent.iterdir()) == ["lda.npz"]


def test_a_variational_training_reports_its_checkpoint_writes(tmp_path):
    cls = registry.model_class("avipam")
    corpus = synthetic_corpus(40, 30, 14, seed=2, n_latent=3)
    path = tmp_path / "a.ckpt"
    sizes = []
    m = cls(**dict(cls.quick_params, checkpoint_every=1, callback_every=1)).fit(
        corpus, checkpoint=path, callback=lambda model, it, n: sizes.append([it, path.stat().st_size]))
    assert len(sizes) == cls.quick_params["epochs"]
    np.testing.assert_array_equal(m.checkpoint_writes_, sizes)
    assert m.checkpoint_bytes_ == sum(s for _, s in sizes)


@pytest.mark.parametrize("kind, version, ok", [
    (ck.CHECKPOINT_FORMAT, 1, True), (ck.CHECKPOINT_FORMAT, 2, True), (ck.CHECKPOINT_FORMAT, 3, False),
    (ck.MODEL_FORMAT, 1, True), (ck.MODEL_FORMAT, 2, False)])
def test_a_newer_format_asks_for_an_upgrade(tmp_path, kind, version, ok):
    """Checkpoints that list their samples' files are format 2, which an older topicir refuses as
    newer rather than as damaged; model files stay format 1."""
    path = tmp_path / "f.npz"
    ck.write_model_file(path, {"model": "LDA"}, {"a": np.arange(3)}, kind=kind)
    f = ck.read_model_file(path, kind=kind)
    assert f.header["format_version"] == ck.FORMAT_VERSIONS[kind] == {ck.MODEL_FORMAT: 1}.get(kind, 2)
    header = dict(f.header, format_version=version)
    blob = np.frombuffer(json.dumps(header).encode("utf-8"), dtype=np.uint8)
    with open(path, "wb") as out:
        np.savez(out, __header__=blob, a=np.arange(3))
    if ok:
        assert ck.read_model_file(path, kind=kind).header["format_version"] == version
    else:
        with pytest.raises(ValueError, match=rf"f\.npz: format version {version} is newer than this "
                                             rf"topicir .*upgrade topicir to read it"):
            ck.read_model_file(path, kind=kind)


def test_tcm_writes_its_boundaries_as_int16_and_resumes_a_checkpoint_of_int32_ones(tmp_path):
    """TCM's b (a topic or -1 per token) takes 2 bytes in a checkpoint and its kept samples
    while the topics fit; a checkpoint written with 4-byte boundaries resumes alike."""
    cls, params, corpus, inputs = setup("tcm")
    full = cls(**params).fit(corpus, **inputs)
    path = tmp_path / "m.ckpt"
    killed_after(cls, params, corpus, inputs, path, 10)
    f = ck.read_model_file(path, kind=ck.CHECKPOINT_FORMAT)
    assert f.arrays["b"].dtype == np.int16 and f.arrays["b"].shape == (2, corpus.n_tokens)
    sample = ck.read_model_file(kept.kept_path(path, 0, 6), kind=ck.CHECKPOINT_FORMAT)
    assert sample.arrays["sample_b"].dtype == np.int16
    h = {k: v for k, v in f.header.items() if k not in _FORMAT_KEYS}
    ck.write_model_file(path, h, dict(f.arrays, b=np.asarray(f.arrays["b"]).astype(np.int32)),
                        kind=ck.CHECKPOINT_FORMAT)
    assert_same_model(cls(**params).fit(corpus, checkpoint=path, **inputs), full)
    # more topics than int16 holds: the boundaries stay int32
    assert cls(n_topics=40000)._b_file_dtype() is np.int32


def test_glda_writes_its_groups_and_topics_as_uint16_and_resumes_a_checkpoint_of_int32_ones(tmp_path):
    """gLDA's state (every token's group in its document, every group's topic) takes 2 bytes
    an entry in a checkpoint and its kept samples while both fit; int32 ones resume alike."""
    cls, params, corpus, inputs = setup("glda")
    full = cls(**params).fit(corpus, **inputs)
    path = tmp_path / "m.ckpt"
    killed_after(cls, params, corpus, inputs, path, 10)
    f = ck.read_model_file(path, kind=ck.CHECKPOINT_FORMAT)
    gz = np.asarray(f.arrays["gz"])
    assert gz.dtype == np.uint16 and gz.shape == (2, corpus.n_tokens + full.zg_.shape[1])
    sample = ck.read_model_file(kept.kept_path(path, 0, 6), kind=ck.CHECKPOINT_FORMAT)
    assert sample.arrays["sample_gz"].dtype == np.uint16
    h = {k: v for k, v in f.header.items() if k not in _FORMAT_KEYS}
    ck.write_model_file(path, h, dict(f.arrays, gz=gz.astype(np.int32)), kind=ck.CHECKPOINT_FORMAT)
    assert_same_model(cls(**params).fit(corpus, checkpoint=path, **inputs), full)


def _tree_lda_path_ids(path, ptr, corpus):
    """Checkpoint ``path`` and its listed kept samples rewritten in the form topicir wrote before
    path ranks: topics and path ids, int32 (the samples' hashes listed anew)."""
    N, old = corpus.n_tokens, {}

    def path_ids(zzp):
        zzp = np.asarray(zzp)
        return np.concatenate([zzp[:, :N], zzp[:, N:] + ptr[corpus.term_ids]], axis=1).astype(np.int32)
    f = ck.read_model_file(path, kind=ck.CHECKPOINT_FORMAT)
    h = {k: v for k, v in f.header.items() if k not in _FORMAT_KEYS}
    for j, (c, i) in enumerate(zip(h["sample_chain"], h["sample_iter"])):
        side = ck.read_model_file(kept.kept_path(path, c, i), kind=ck.CHECKPOINT_FORMAT)
        arrays = dict(side.arrays, sample_zzp=path_ids(side.arrays["sample_zzp"]))
        side_header = {k: v for k, v in side.header.items() if k not in _FORMAT_KEYS}
        ck.write_model_file(kept.kept_path(path, c, i), side_header, arrays, kind=ck.CHECKPOINT_FORMAT)
        h["sample_sha256"][j] = kept.digest(arrays)
        old[c, i] = arrays["sample_zzp"]
    ck.write_model_file(path, h, dict(f.arrays, zzp=path_ids(f.arrays["zzp"])), kind=ck.CHECKPOINT_FORMAT)
    return old


def test_tree_lda_writes_topics_and_path_ranks_as_uint16_and_resumes_a_checkpoint_of_int32_path_ids(tmp_path):
    """tree-LDA's state (every token's topic, then its path as its rank among its word's paths)
    takes 2 bytes an entry in a checkpoint and its kept samples while the topics and every
    word's path count fit; a checkpoint and kept samples of int32 path ids (the form written
    before) resume alike."""
    cls, params, corpus, inputs = setup("tree-lda")
    full = cls(**params).fit(corpus, **inputs)
    path = tmp_path / "m.ckpt"
    killed_after(cls, params, corpus, inputs, path, 10)
    N, ptr = corpus.n_tokens, full.tree_.word_path_ptr
    f = ck.read_model_file(path, kind=ck.CHECKPOINT_FORMAT)
    zzp = np.asarray(f.arrays["zzp"])
    assert zzp.dtype == np.uint16 and zzp.shape == (2, 2 * N)
    n_paths = np.diff(ptr)[corpus.term_ids]
    assert (zzp[:, N:] < n_paths).all() and (zzp[:, N:] > 0).any() and n_paths.max() > 1
    sample = ck.read_model_file(kept.kept_path(path, 0, 6), kind=ck.CHECKPOINT_FORMAT)
    assert sample.arrays["sample_zzp"].dtype == np.uint16
    resumed = cls(**params).fit(corpus, checkpoint=path, **inputs)
    assert_same_model(resumed, full)

    path = tmp_path / "old" / "m.ckpt"
    killed_after(cls, params, corpus, inputs, path, 10)
    old = _tree_lda_path_ids(path, ptr, corpus)
    assert len(old) == 4 and all(a.dtype == np.int32 and (a[0, N:] >= n_paths).any() for a in old.values())
    assert_same_model(cls(**params).fit(corpus, checkpoint=path, **inputs), full)
    # a word of more paths than uint16 counts: the old form, path ids as int32
    m = cls(n_topics=3)
    m.tree_ = full.tree_._replace(word_path_ptr=np.array([0, 1 << 16, (1 << 17) + 1]))
    assert m._zzp_file_dtype() is np.int32
    m.tree_ = full.tree_._replace(word_path_ptr=np.array([0, 1 << 16, 1 << 17]))
    assert m._zzp_file_dtype() is np.uint16


def test_a_tree_lda_checkpoint_with_a_token_off_its_words_paths_is_refused_in_one_line(tmp_path):
    """A path rank at its word's path count (one past its last path), in the checkpoint or in a
    kept sample (its hash listed anew), and a path id off its word in a checkpoint of path ids,
    are refused in one line naming the file, before any sweep."""
    cls, params, corpus, inputs = setup("tree-lda")
    path = tmp_path / "m.ckpt"
    killed_after(cls, params, corpus, inputs, path, 10)
    N = corpus.n_tokens
    ptr = build_tree(SYN, corpus.n_terms, 0.01, 100.0, False).word_path_ptr
    n_paths = np.diff(ptr)[corpus.term_ids]
    t = int(np.flatnonzero(n_paths > 1)[-1])  # a token of a word with several paths
    f = ck.read_model_file(path, kind=ck.CHECKPOINT_FORMAT)
    h = {k: v for k, v in f.header.items() if k not in _FORMAT_KEYS}

    def resume(p):
        with pytest.raises(ValueError) as info:
            cls(**params).fit(corpus, callback=lambda *a: pytest.fail("a sweep ran"), checkpoint=p, **inputs)
        return info.value

    p = _copy(path, tmp_path / "rank" / "m.ckpt")
    zzp = np.array(f.arrays["zzp"])
    zzp[1, N + t] = n_paths[t]
    ck.write_model_file(p, h, dict(f.arrays, zzp=zzp), kind=ck.CHECKPOINT_FORMAT)
    msg = _one_line(resume(p), p)
    assert f"zzp holds path {n_paths[t]} of a word of {n_paths[t]} paths" in msg

    p = _copy(path, tmp_path / "kept" / "m.ckpt")
    side = ck.read_model_file(kept.kept_path(p, 1, 8), kind=ck.CHECKPOINT_FORMAT)
    zzp = np.array(side.arrays["sample_zzp"])
    zzp[0, N + t] = 65535
    arrays = dict(side.arrays, sample_zzp=zzp)
    side_header = {k: v for k, v in side.header.items() if k not in _FORMAT_KEYS}
    ck.write_model_file(kept.kept_path(p, 1, 8), side_header, arrays, kind=ck.CHECKPOINT_FORMAT)
    hashes = list(h["sample_sha256"])
    hashes[list(zip(h["sample_chain"], h["sample_iter"])).index((1, 8))] = kept.digest(arrays)
    ck.write_model_file(p, dict(h, sample_sha256=hashes), f.arrays, kind=ck.CHECKPOINT_FORMAT)
    assert "sample_zzp holds path 65535 of a word of" in _one_line(resume(p), kept.kept_path(p, 1, 8))

    p = _copy(path, tmp_path / "ids" / "m.ckpt")
    _tree_lda_path_ids(p, ptr, corpus)
    f = ck.read_model_file(p, kind=ck.CHECKPOINT_FORMAT)
    zzp = np.array(f.arrays["zzp"])
    zzp[1, N + t] = ptr[corpus.term_ids[t] + 1]  # the next word's first path
    ck.write_model_file(p, {k: v for k, v in f.header.items() if k not in _FORMAT_KEYS},
                        dict(f.arrays, zzp=zzp), kind=ck.CHECKPOINT_FORMAT)
    assert f"zzp holds path {zzp[1, N + t]}, not a path of its token's word" in _one_line(resume(p), p)
