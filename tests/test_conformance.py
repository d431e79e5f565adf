"""The guarantees every registered model kind keeps, checked for each kind of models.registry:
a new kind gets these tests by registering (with its ``quick_params``).

Trained through retrieval's own path (``train_model``: the adapter's training inputs, model
files beside a real index), on a small synthetic collection of English words in three themes.
"""
import subprocess
import sys

import numpy as np
import pytest

from models import registry
from tests.helpers import Killed

THEMES = [
    "car automobile engine motor vehicle driver road wheel traffic speed",
    "doctor physician medicine hospital patient nurse illness disease treatment health",
    "river stream water bank flood lake rain shore boat fish",
]


@pytest.fixture(scope="session", autouse=True)
def wordnet_for_tree_lda(tmp_path_factory):
    """tree-lda reads WordNet: where /usr/share/wordnet is absent, a tiny one of the themes'
    synonyms (through $WORDNET_DIR, which the adapter's reader honours)."""
    import os

    from retrieval.datasets.wordnet import wordnet_dir
    from tests.helpers import write_wordnet

    if wordnet_dir() is not None:
        yield
        return
    d = write_wordnet(tmp_path_factory.mktemp("wordnet"), [["car", "automobile", "motor_vehicle"],
                      ["doctor", "physician"], ["river", "stream"], ["illness", "disease"]])
    os.environ["WORDNET_DIR"] = str(d)
    yield
    del os.environ["WORDNET_DIR"]


@pytest.fixture(scope="session")
def collection(tmp_path_factory):
    """An index of 40 documents, each mixing one or two themes; built once per session."""
    from retrieval.core.index import build_index

    root = tmp_path_factory.mktemp("conformance")
    rng = np.random.default_rng(0)
    words = [t.split() for t in THEMES]
    docs = []
    for d in range(40):
        themes = rng.choice(3, size=rng.integers(1, 3), replace=False)
        text = " ".join(rng.choice(words[rng.choice(themes)]) for _ in range(rng.integers(15, 40)))
        docs.append(f"<DOC>\n<DOCNO> C{d:03d} </DOCNO>\n<TEXT>\n{text}.\n</TEXT>\n</DOC>\n")
    (root / "docs.trec").write_text("".join(docs))
    return build_index([root / "docs.trec"], root / "index")


def train(index, kind, path, **over):
    from retrieval.core.modelfiles import train_model

    params = dict(registry.model_class(kind).quick_params, **over)
    return train_model(index, kind, path, progress=False, **params)


@pytest.fixture(scope="session")
def trained(collection, tmp_path_factory):
    """One model per kind (trained on first use), with the file it was saved to."""
    cache = {}

    def get(kind):
        if kind not in cache:
            path = tmp_path_factory.mktemp(f"model-{kind}") / f"{kind}.npz"
            cache[kind] = train(collection, kind, path)
        return cache[kind]
    return get


KINDS = registry.kinds()


def test_every_kind_declares_quick_params():
    for kind in KINDS:
        cls = registry.model_class(kind)
        assert cls.kind == kind and "seed" in cls.quick_params, kind


@pytest.mark.parametrize("kind", KINDS)
def test_document_model(kind, trained, collection):
    model, _ = trained(kind)
    V, D = collection.stats.n_terms, collection.stats.n_docs
    p = model.p_w_d(np.arange(V))
    assert p.shape == (D, V) and np.isfinite(p).all() and (p > 0).all()
    if model.p_w_d_sums_to_one:  # the document model is a distribution over words
        # tree-LDA and TCM sum a (document, sample)'s topics in float32
        np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-9 if kind not in ("tree-lda", "tcm") else 1e-6)
    else:
        assert (p.sum(axis=1) < 1).all()
    per = model.p_w_d_per_sample(np.array([0, 3, 5]))
    assert per.shape[:2] == (model.n_chains, len(model.sample_iter_)) and per.shape[2:] == (D, 3)
    np.testing.assert_allclose(per.mean(axis=(0, 1)), p[:, [0, 3, 5]], rtol=1e-12)
    ids, probs = model.doc_topics(0, top=3)
    assert len(ids) == len(probs) <= 3 and (np.diff(probs) <= 0).all() and (0 <= ids).all()
    assert (ids < model.n_topics).all()
    words, wp = model.topic_words(int(ids[0]), top=5)
    assert 0 < len(words) <= 5 and (np.diff(wp) <= 0).all() and (words < V).all()
    with pytest.raises(ValueError, match="out of range"):
        model.p_w_d(np.array([V]))
    assert model.log_lik_.shape == (len(model.log_lik_iter_), model.n_chains)
    assert np.isfinite(model.log_lik_).all()


@pytest.mark.parametrize("kind", KINDS)
def test_save_load_and_fingerprint(kind, trained, collection):
    model, path = trained(kind)
    back = registry.load(path, fingerprint=collection.fingerprint)
    assert type(back) is type(model) and back.get_params() == model.get_params()
    terms = np.arange(collection.stats.n_terms)
    np.testing.assert_array_equal(back.p_w_d(terms), model.p_w_d(terms))
    np.testing.assert_array_equal(back.log_lik_, model.log_lik_)
    with pytest.raises(ValueError, match="fingerprint"):
        registry.load(path, fingerprint="another-index")
    other = next(k for k in KINDS if registry.model_class(k) is not type(model))
    with pytest.raises(ValueError, match=f"holds a {type(model).__name__!r} model"):
        registry.model_class(other).load(path)


@pytest.mark.parametrize("kind", KINDS)
def test_mapped_file_gives_the_same_document_model(kind, trained, collection, monkeypatch):
    """Every integer member mapped (models/common/checkpoint.py), as a large file's are, and
    passes over its tables a few entries at a time (a document range, a piece of an array,
    each released after it): the same document model as the fitted one, bit for bit."""
    from models.common import checkpoint as ck

    model, path = trained(kind)
    monkeypatch.setattr(ck, "MAP_BYTES", 1)
    monkeypatch.setattr(ck, "PASS_BYTES", 64)
    back = registry.load(path, fingerprint=collection.fingerprint)
    ints = [n for n in back._INFERENCE_ARRAYS if getattr(back, n + "_").dtype.kind in "iu"]
    assert all(ck.is_mapped(getattr(back, n + "_")) for n in ints)
    assert ints or kind == "avipam"  # aviPAM's arrays are floating-point
    assert all(ck.is_mapped(getattr(back, n + "_")) for n in back._INFERENCE_ARRAYS
               if getattr(back, n + "_").dtype.kind == "f")  # mapped too, their CRC checked
    terms = np.arange(collection.stats.n_terms)
    np.testing.assert_array_equal(back.p_w_d(terms), model.p_w_d(terms))
    np.testing.assert_array_equal(back.p_w_d_per_sample(terms[:4]), model.p_w_d_per_sample(terms[:4]))
    for got, want in zip(back.doc_topics(1, top=4), model.doc_topics(1, top=4)):
        np.testing.assert_array_equal(got, want)


# The document tables a kind's p_w_d passes over document range after range (doc_ranges).
DOC_TABLES = {"pam": ("dp_ptr", "dp_key_samples", "dp_count_samples"), "tcm": ("dk_ptr", "dk_topic", "dk_count"),
              "tree-lda": ("dk_ptr", "dk_topic", "dk_count")}


@pytest.mark.parametrize("kind", sorted(DOC_TABLES))
def test_document_model_releases_the_document_table_as_it_goes(kind, trained, collection, monkeypatch):
    """A mapped file's document table is read a document range at a time, and every range's
    entries of every sample are released after it: a batch holds a range of the table, not the
    table (the pages, then, are the file's again)."""
    from models.common import checkpoint as ck

    _, path = trained(kind)
    monkeypatch.setattr(ck, "MAP_BYTES", 1)
    monkeypatch.setattr(ck, "PASS_BYTES", 64)
    back = registry.load(path, fingerprint=collection.fingerprint)
    ptr, *rows = (getattr(back, n + "_") for n in DOC_TABLES[kind])
    assert len(list(ck.doc_ranges(ptr, rows, 16))) > 1  # a pass takes several ranges
    released = {id(a): np.zeros(len(a), dtype=np.int64) for a in rows}
    release = ck.release

    def record(a, lo, hi):
        if id(a) in released:
            released[id(a)][lo:hi] += 1
        release(a, lo, hi)
    monkeypatch.setattr(ck, "release", record)
    back.p_w_d(np.arange(collection.stats.n_terms))
    for a in rows:
        np.testing.assert_array_equal(released[id(a)], 1)  # every entry once, after its range
    assert all(ck.is_mapped(a) for a in rows)


@pytest.mark.parametrize("kind", KINDS)
def test_resumed_equals_uninterrupted(kind, trained, collection, tmp_path):
    from retrieval.core.modelfiles import index_corpus, training_inputs

    model, _ = trained(kind)
    cls = type(model)
    params = dict(cls.quick_params)
    if "checkpoint_every" in cls._param_names():
        params["checkpoint_every"] = 2
    corpus = index_corpus(collection)
    inputs = training_inputs(collection, cls(**params), progress=False)
    ckpt = tmp_path / "m.ckpt"

    def kill(m, it, n_iter):
        if it == n_iter // 2 + 1:
            raise Killed

    with pytest.raises(Killed):
        cls(**params).fit(corpus, callback=kill, checkpoint=ckpt, **inputs)
    assert ckpt.exists() and not list(tmp_path.glob("*.tmp*"))
    resumed = cls(**params).fit(corpus, checkpoint=ckpt, **inputs)
    terms = np.arange(collection.stats.n_terms)
    np.testing.assert_array_equal(resumed.p_w_d(terms), model.p_w_d(terms))
    np.testing.assert_array_equal(resumed.log_lik_, model.log_lik_)


@pytest.mark.parametrize("kind", KINDS)
def test_training_ends_on_document_completion_of_a_training_sample(kind, collection, tmp_path, caplog):
    """Every kind's training logs one figure comparable across kinds, after the model is saved."""
    from models.common.heldout import document_completion, training_sample
    from retrieval.core.modelfiles import index_corpus

    with caplog.at_level("INFO", logger="retrieval.core.modelfiles"):
        model, _ = train(collection, kind, tmp_path / f"{kind}.npz")
    corpus = index_corpus(collection)
    want = document_completion(model, training_sample(corpus, model.seed), seed=model.seed)
    line = [r.getMessage() for r in caplog.records if "document completion" in r.getMessage()]
    assert line == [f"document completion of 40 training documents (even positions folded in, odd ones "
                    f"scored): {want.log_lik:.4f} log-likelihood per token, perplexity {np.exp(-want.log_lik):.0f}"]
    if model.p_w_d_sums_to_one:  # TCM's words leave mass to collocations
        assert -np.log(corpus.n_terms) < want.log_lik < 0  # better than the uniform model
    assert caplog.records[-1].getMessage() == line[0]


@pytest.mark.parametrize("kind", KINDS)
def test_same_model_whatever_the_threads(kind, trained, collection):
    from retrieval.core.modelfiles import index_corpus, training_inputs

    model, _ = trained(kind)
    cls = type(model)
    if "n_jobs" not in cls._param_names():
        pytest.fail(f"{kind} has no n_jobs parameter: say how threads are set")
    one = cls(**dict(cls.quick_params, n_jobs=1))
    corpus = index_corpus(collection)
    one.fit(corpus, **training_inputs(collection, one, progress=False))
    terms = np.arange(collection.stats.n_terms)
    np.testing.assert_array_equal(one.p_w_d(terms), model.p_w_d(terms))  # model: all threads


def test_import_models_loads_no_retrieval_jvm_or_torch():
    code = ("import sys, models; from models import registry; registry.model_class('lda'); "
            "bad = [m for m in ('retrieval', 'jnius', 'pyserini', 'torch') if m in sys.modules]; "
            "print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


@pytest.mark.parametrize("kind", KINDS)
def test_checkpoint_refuses_another_corpus_or_parameters(kind, collection, tmp_path):
    from models.common.corpus import make_corpus
    from retrieval.core.modelfiles import index_corpus, training_inputs

    cls = registry.model_class(kind)
    corpus = index_corpus(collection)
    inputs = training_inputs(collection, cls(**cls.quick_params), progress=False)
    ckpt = tmp_path / "m.ckpt"
    cls(**cls.quick_params).fit(corpus, checkpoint=ckpt, **inputs)
    other = make_corpus(corpus.doc_ptr, corpus.term_ids[::-1].copy(), corpus.n_terms, fingerprint="other")
    with pytest.raises(ValueError, match="fingerprint"):
        cls(**cls.quick_params).fit(other, checkpoint=ckpt, **inputs)
    with pytest.raises(ValueError, match="seed"):
        cls(**dict(cls.quick_params, seed=cls.quick_params["seed"] + 1)).fit(corpus, checkpoint=ckpt, **inputs)
