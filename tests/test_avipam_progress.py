"""aviPAM's training trace: the ELBO named as an ELBO, and the document-completion figure of a
sample of the training documents, which is comparable with other kinds', recorded as it trains."""
import copy
import io
import re

import numpy as np
import pytest

from models.common import checkpoint as ckpt
from models.avipam.model import AVIPAM
from models.common.heldout import document_completion, training_sample
from models.lda.model import LDA
from models.common.progress import TqdmCallback
from tests.helpers import Killed, resume_after_kill
from tests.test_avipam import KW, pam4_corpus


@pytest.fixture(scope="module")
def corpus():
    return pam4_corpus(n_docs=360, doc_len=30, seed=5)[0]


def encoder_only(model):
    """``model`` inferring documents by one encoder pass at the posterior means."""
    m = copy.copy(model)
    m.refine_steps = m.doc_samples = 0
    return m


def test_the_trace_is_document_completion_of_the_training_sample(corpus):
    m = AVIPAM(epochs=5, log_lik_every=2, **KW).fit(corpus)
    np.testing.assert_array_equal(m.dc_log_lik_iter_, [2, 4, 5])
    sample = training_sample(corpus, m.seed)
    assert len(sample) == 300  # of the 360 documents
    # after the last epoch the trace is the fitted model's completion, its documents inferred
    # by the encoder alone
    want = document_completion(encoder_only(m), sample, seed=m.seed)
    assert m.dc_log_lik_[-1] == want.log_lik and want.n_docs == 300
    # a log-likelihood per token, not the ELBO: above it, and above the uniform model's
    assert (m.dc_log_lik_ > -np.log(corpus.n_terms)).all()
    assert (m.dc_log_lik_ > m.log_lik_[m.dc_log_lik_iter_ - 1, 0]).all()


@pytest.mark.parametrize("over", [{}, dict(decoder="product", topic_update="gradient"),
                                  dict(topic_update="em"), dict(arch="ctm:4", n_chains=2, decoder="mixture")])
def test_recording_the_trace_does_not_change_training(corpus, over):
    kw = dict(KW, epochs=3, **over)
    every = AVIPAM(log_lik_every=1, **kw).fit(corpus)
    once = AVIPAM(log_lik_every=3, **kw).fit(corpus)
    assert len(every.dc_log_lik_) == 3 and len(once.dc_log_lik_) == 1
    assert every.dc_log_lik_[-1] == once.dc_log_lik_[-1]
    for name in ("topic_word_", "doc_mix_", "log_lik_", "beta_", "dec_scale_", "doc_lse_"):
        np.testing.assert_array_equal(getattr(every, name), getattr(once, name), err_msg=name)


def test_checkpoints_carry_the_trace_and_resume_bit_identically(corpus, tmp_path):
    kw = dict(KW, epochs=6, checkpoint_every=2, log_lik_every=2)
    want = AVIPAM(**kw).fit(corpus)
    got = resume_after_kill(AVIPAM, kw, corpus, tmp_path / "avi.ckpt", kill_at=3)
    for name in ("topic_word_", "doc_mix_", "log_lik_", "dc_log_lik_", "dc_log_lik_iter_"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
    # how often the trace is recorded is no part of the model: a checkpoint resumes under another
    path = tmp_path / "other.ckpt"
    with pytest.raises(Killed):
        AVIPAM(**dict(kw, log_lik_every=5)).fit(corpus, checkpoint=path, callback=kill_at(4))
    other = AVIPAM(**dict(kw, log_lik_every=1)).fit(corpus, checkpoint=path)
    np.testing.assert_array_equal(other.topic_word_, want.topic_word_)
    np.testing.assert_array_equal(other.dc_log_lik_iter_, [5, 6])


def kill_at(epoch):
    def kill(model, it, n_iter):
        if it == epoch:
            raise Killed
    return kill


def test_the_model_file_keeps_the_trace_and_files_without_it_load(corpus, tmp_path):
    m = AVIPAM(epochs=3, log_lik_every=1, **KW).fit(corpus)
    path = tmp_path / "avi.npz"
    m.save(path)
    back = AVIPAM.load(path, fingerprint=corpus.fingerprint)
    np.testing.assert_array_equal(back.dc_log_lik_, m.dc_log_lik_)
    np.testing.assert_array_equal(back.dc_log_lik_iter_, [1, 2, 3])
    f = ckpt.read_model_file(path)
    old = {k: v for k, v in f.header.items() if k not in ("dc_log_lik", "dc_log_lik_iter")}
    old["params"] = {k: v for k, v in old["params"].items() if k != "log_lik_every"}
    ckpt.write_model_file(tmp_path / "old.npz", old, dict(f.arrays))
    back = AVIPAM.load(tmp_path / "old.npz", fingerprint=corpus.fingerprint)
    assert back.dc_log_lik_.shape == (0,) and back.log_lik_every == 10
    np.testing.assert_array_equal(back.log_lik_, m.log_lik_)
    bad = dict(f.header, dc_log_lik=[1.0, "x", 2.0])
    ckpt.write_model_file(tmp_path / "bad.npz", bad, dict(f.arrays))
    with pytest.raises(ValueError, match="bad.npz: header dc_log_lik"):
        AVIPAM.load(tmp_path / "bad.npz")


def test_the_bar_names_the_elbo_an_elbo_and_shows_the_completion(corpus):
    bar = io.StringIO()
    AVIPAM(epochs=2, log_lik_every=1, **KW).fit(corpus, callback=TqdmCallback(desc="AVIPAM", file=bar))
    text = bar.getvalue()
    assert "elbo_per_token=" in text and "dc_ll_per_token=" in text
    assert not re.search(r"(?<!dc_)ll_per_token=", text)
    bar = io.StringIO()
    LDA(n_topics=4, n_iter=4, n_jobs=1).fit(corpus, callback=TqdmCallback(desc="LDA", file=bar))
    assert "ll_per_token=" in bar.getvalue() and "elbo" not in bar.getvalue()


def test_log_lik_every_is_checked():
    with pytest.raises(ValueError, match="log_lik_every must be an int >= 1"):
        AVIPAM(log_lik_every=0, **KW).fit(pam4_corpus(n_docs=20, doc_len=5)[0])
