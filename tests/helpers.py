"""Drivers and assertions shared by the tests of the models (Gibbs-sampled and variational)."""
import numpy as np
import pytest


class Killed(Exception):
    """Raised by a callback to stand for a training run killed mid-way."""


def kill_after(cls, kw, corpus, path, kill_at, **fit_kw):
    """Train ``cls(**kw)`` with checkpoint ``path``, kill it after sweep ``kill_at`` and check
    that no half-written file is left."""
    def kill(model, it, n_iter):
        if it == kill_at:
            raise Killed

    with pytest.raises(Killed):
        cls(**kw).fit(corpus, callback=kill, checkpoint=path, **fit_kw)
    assert path.exists() and not path.with_name(path.name + ".tmp").exists()


def stop_at(sweep):
    """A training callback that asks for a stop after ``sweep`` (the first Ctrl-C of ``topicir train``)."""
    from models.common.stopping import StopTraining

    def callback(model, it, n_iter):
        if it == sweep:
            raise StopTraining
    return callback


def stopped_at(fit, path, sweep, written=None):
    """``fit(callback)`` stopped by :func:`stop_at` ``sweep``: raises TrainingStopped, and the
    checkpoint ``path`` holds sweep ``written`` (default ``sweep``). Returns the exception."""
    from models.common import checkpoint as ck
    from models.common.stopping import TrainingStopped

    with pytest.raises(TrainingStopped) as e:
        fit(stop_at(sweep))
    assert ck.read_model_file(path, kind=ck.CHECKPOINT_FORMAT).header["iteration"] == (written or sweep)
    return e.value


def resume_after_kill(cls, kw, corpus, path, kill_at, **fit_kw):
    """:func:`kill_after`, then resume to the end (with another n_jobs)."""
    kill_after(cls, kw, corpus, path, kill_at, **fit_kw)
    return cls(**dict(kw, n_jobs=1)).fit(corpus, checkpoint=path, **fit_kw)


def checkpoint_before(cls, kw, corpus, path, epochs_done, dropped):
    """A checkpoint of ``cls(**kw)`` after ``epochs_done`` epochs as a version without the
    parameters ``dropped`` wrote it: trained that far, then its header's parameters rewritten
    without them (and with ``kw``'s epochs, the run it belongs to)."""
    from models.common import checkpoint as ckpt

    cls(**dict(kw, epochs=epochs_done)).fit(corpus, checkpoint=path)
    f = ckpt.read_model_file(path, kind=ckpt.CHECKPOINT_FORMAT)
    header = dict(f.header)
    header["params"] = {k: v for k, v in header["params"].items() if k not in dropped}
    header["params"]["epochs"] = kw["epochs"]
    ckpt.write_model_file(path, header, dict(f.arrays), kind=ckpt.CHECKPOINT_FORMAT)


def assert_doc_lists(dt_topic, dt_count, dt_nnz, cap_ptr, n_dk, ordered=True):
    """Sparse per-row lists (distinct topics, ascending if ``ordered``; positive counts) that hold
    exactly the dense counts ``n_dk`` of shape (n_rows, n_topics)."""
    for d in range(len(n_dk)):
        nnz = dt_nnz[d]
        topics = dt_topic[cap_ptr[d]:cap_ptr[d] + nnz]
        counts = dt_count[cap_ptr[d]:cap_ptr[d] + nnz]
        assert (counts > 0).all() and len(np.unique(topics)) == nnz
        assert not ordered or (np.diff(topics) > 0).all()
        dense = np.zeros(n_dk.shape[1], dtype=np.int64)
        dense[topics] = counts
        np.testing.assert_array_equal(dense, n_dk[d])


def save_and_load(model, path, fingerprint):
    """Save ``model`` and load it back: written atomically, same parameters, fingerprint,
    log-likelihood trace and P(w | d). Returns the loaded model."""
    model.save(path)
    assert not path.with_name(path.name + ".tmp").exists()
    back = type(model).load(path, fingerprint=fingerprint)
    assert back.get_params() == model.get_params() and back.fingerprint_ == fingerprint
    np.testing.assert_array_equal(back.log_lik_, model.log_lik_)
    terms = np.arange(back.n_terms_)
    np.testing.assert_array_equal(back.p_w_d(terms), model.p_w_d(terms))
    return back


def assert_same_fit(got, want, *attrs):
    """``got`` ends as ``want`` did: equal ``attrs``, log-likelihood trace, kept sweeps and
    P(w | d) of every term."""
    for name in attrs + ("log_lik_", "sample_iter_"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
    terms = np.arange(want.n_terms_)
    np.testing.assert_array_equal(got.p_w_d(terms), want.p_w_d(terms))


def med_map_of_default_model(shared_data, index, kind, lams=(1.0, 0.7)):
    """MAP on med (judged title queries, mu = 1000) of QL mixed with the K = 800 model of ``kind``
    that ``topicir reproduce smoothing`` trains; returns ({lam: MAP}, index, model)."""
    from retrieval.core.ranking import sweep_topics
    from retrieval.core.evaluate import aggregate, judged_topics
    from retrieval.experiments.smoothing import TRAIN, _model
    from retrieval.core.sources import load_qrels, load_topics

    model = _model(index, kind, 800, TRAIN)
    qrels = load_qrels(shared_data / "med" / "qrels.txt")
    topics = [t for t in load_topics(shared_data / "med" / "topics.trec") if t.qid in judged_topics(qrels)]
    runs = sweep_topics(index, topics, [(1000.0, lam) for lam in lams], model=model, progress=False)
    return {lam: aggregate(runs[(1000.0, lam)], qrels, ["AP"])["AP"] for lam in lams}, index, model


def avg2_map(index, model, topics, qrels, s, mu=1000.0, lam=0.7):
    """MAP of ranking with the chains' P(w|d) of kept sample ``s`` averaged, computed directly
    with the scorer (the slow path ``topicir iterations`` must agree with)."""
    from retrieval.core.evaluate import aggregate, judged_topics
    from retrieval.core.ranking import ranked
    from retrieval.core.scoring import Scorer

    judged = judged_topics(qrels)
    run = []
    for t in topics:
        if t.qid not in judged:
            continue
        scorer = Scorer(index.stats, mu, lam, model)
        query = scorer.query(t.title, index.analyze(t.title))
        p = model.p_w_d_per_sample(query.term_ids)[:, s].mean(axis=0)
        run.extend(ranked(index, t.qid, scorer.score(query, p)))
    return aggregate(run, qrels, ["AP"])["AP"]


def write_wordnet(directory, synsets):
    """A WordNet directory in the wndb(5) ``data.*`` format holding ``synsets`` (lists of lemmas)
    as nouns, with empty verb/adj/adv files: for tests where /usr/share/wordnet is absent."""
    from pathlib import Path

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    lines = ["  1 This is a license line of the test's own WordNet.\n"]
    for i, lemmas in enumerate(synsets):
        words = " ".join(f"{w} 0" for w in lemmas)
        lines.append(f"{i:08d} 03 n {len(lemmas):02x} {words} 000 | a test synset\n")
    (d / "data.noun").write_text("".join(lines))
    for pos in ("verb", "adj", "adv"):
        (d / f"data.{pos}").write_text(lines[0])
    return d


def block_topics(n_topics, words_per, floor=0.002):
    """Topic-word matrix of a planted corpus: topic k puts almost all its mass on its own block
    of ``words_per`` words (the rest ``floor`` before normalising)."""
    beta = np.full((n_topics, n_topics * words_per), floor)
    for k in range(n_topics):
        beta[k, k * words_per:(k + 1) * words_per] = 1.0
    return beta / beta.sum(1, keepdims=True)
