"""aviPAM's semi-amortized document posteriors: refinement on each document's ELBO, mixtures
averaged over posterior draws, the parameters in model files (and files from before them)."""
import numpy as np
import pytest
import torch

from models.common import checkpoint as ck
from models.avipam.model import AVIPAM
from models.common.variational import count_matrix
from tests.test_avipam import pam4_corpus

KW = dict(hidden=16, batch_size=40, lr=3e-3, epochs=4, n_jobs=1, alpha=1.0, alpha_root=1.0, topic_update="gradient",
          n_chains=1)


@pytest.fixture(scope="module")
def corpus():
    return pam4_corpus(n_docs=120, doc_len=40, seed=2)[0]


@pytest.fixture(scope="module")
def fitted(corpus):
    return AVIPAM(arch="4pam:2,6", refine_steps=15, doc_samples=8, **KW).fit(corpus)


def one_pass_mixtures(model, corpus):
    """The encoder's posterior-mean mixtures, straight from the network."""
    x = torch.from_numpy(count_matrix(corpus).toarray())
    with torch.no_grad():
        mix, _ = model.net_(x, None, sample=False)
    mix = mix.numpy().astype(np.float64)
    return mix / mix.sum(1, keepdims=True)


@pytest.mark.parametrize("arch, decoder", [("4pam:2,6", "mixture"), ("4pam:2,6", "product"),
                                           ("ctm:6", "mixture"), ("molda:3:3", "mixture")])
def test_refinement_raises_every_documents_elbo(corpus, arch, decoder):
    m = AVIPAM(arch=arch, decoder=decoder, **KW).fit(corpus)
    before = m.elbo(corpus, refine_steps=0, n_samples=32, seed=5)
    after = m.elbo(corpus, refine_steps=20, n_samples=32, seed=5)
    assert before.shape == after.shape == (corpus.n_docs,) and np.isfinite(after).all()
    # the amortization gap: a few nats per document of 40 tokens, nearly every document gains
    assert after.mean() > before.mean() + 1.0, (before.mean(), after.mean())
    assert (after > before).mean() > 0.9
    # the default (the model's refine_steps) is what transform uses
    np.testing.assert_array_equal(m.elbo(corpus, n_samples=4, seed=1),
                                  m.elbo(corpus, refine_steps=m.refine_steps, n_samples=4, seed=1))


def test_mixtures_are_refined_averaged_and_deterministic(fitted, corpus):
    mix = fitted.transform(corpus)
    # fit's stored mixtures are what transform gives, draw for draw
    np.testing.assert_array_equal(mix, fitted.doc_mix_)
    np.testing.assert_allclose(mix.sum(1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(fitted.transform(corpus), mix)
    again = AVIPAM(arch="4pam:2,6", refine_steps=15, doc_samples=8, **KW).fit(corpus)
    np.testing.assert_array_equal(again.doc_mix_, mix)
    other = AVIPAM(arch="4pam:2,6", refine_steps=15, doc_samples=8, **dict(KW, seed=1)).fit(corpus)
    assert not np.allclose(other.doc_mix_, mix)
    # refinement moves the mixtures away from the encoder's one pass
    one = one_pass_mixtures(fitted, corpus)
    assert np.abs(mix - one).sum(1).mean() > 0.05
    plain = AVIPAM(arch="4pam:2,6", refine_steps=0, doc_samples=0, **KW).fit(corpus)
    np.testing.assert_allclose(plain.doc_mix_, one_pass_mixtures(plain, corpus), rtol=1e-6)
    # fold-in infers new documents the same way
    np.testing.assert_array_equal(fitted.fold_in(corpus).doc_topics_, mix)


def test_averaged_draws_approach_the_posterior_mean(corpus):
    """doc_samples averages the mixture over posterior draws: more draws, less spread between
    two streams of draws (the seed), and flatter rows than the mixture at the mean logits."""
    def mixtures(samples, seed):
        m = AVIPAM(arch="4pam:2,6", refine_steps=0, doc_samples=samples, **dict(KW, seed=seed))
        return m.fit(corpus).doc_mix_
    a, b = mixtures(4, 0), mixtures(4, 0)
    np.testing.assert_array_equal(a, b)
    m = AVIPAM(arch="4pam:2,6", refine_steps=0, doc_samples=4, **KW).fit(corpus)
    m.doc_samples = 256
    many = m.transform(corpus)
    m.doc_samples = 4
    few = m.transform(corpus)
    m.doc_samples = 64
    mid = m.transform(corpus)
    assert np.abs(mid - many).sum(1).mean() < np.abs(few - many).sum(1).mean()


def test_save_and_load_keep_the_document_model(fitted, corpus, tmp_path):
    path = tmp_path / "avi.npz"
    fitted.save(path)
    params = ck.read_header(path)["params"]
    assert params["refine_steps"] == 15 and params["doc_samples"] == 8
    back = AVIPAM.load(path, fingerprint=corpus.fingerprint)
    assert (back.refine_steps, back.doc_samples) == (15, 8)
    V = corpus.n_terms
    np.testing.assert_array_equal(back.p_w_d(np.arange(V)), fitted.p_w_d(np.arange(V)))
    np.testing.assert_array_equal(back.transform(corpus), fitted.doc_mix_)


def test_files_from_before_refinement_load_as_one_pass(fitted, corpus, tmp_path):
    """A file without the parameters holds one-pass mixtures; it loads as such, and new
    documents are inferred the way it inferred them."""
    plain = AVIPAM(arch="4pam:2,6", refine_steps=0, doc_samples=0, **KW).fit(corpus)
    plain.save(tmp_path / "new.npz")
    f = ck.read_model_file(tmp_path / "new.npz")
    header = {k: v for k, v in f.header.items() if k not in ("format", "format_version", "arrays")}
    header["params"] = {k: v for k, v in header["params"].items()
                        if k not in ("refine_steps", "doc_samples")}
    ck.write_model_file(tmp_path / "old.npz", header, dict(f.arrays))
    back = AVIPAM.load(tmp_path / "old.npz", fingerprint=corpus.fingerprint)
    assert (back.refine_steps, back.doc_samples) == (0, 0)
    np.testing.assert_array_equal(back.p_w_d([1, 5]), plain.p_w_d([1, 5]))
    np.testing.assert_allclose(back.transform(corpus), plain.doc_mix_, rtol=1e-6)
    # a checkpoint's run does not depend on them: resuming with other values is allowed
    from models.common.variational import _RESUME_FREE
    assert {"refine_steps", "doc_samples"} <= set(_RESUME_FREE)


@pytest.mark.parametrize("name, bad", [("refine_steps", -1), ("refine_steps", 2.5),
                                       ("doc_samples", -3), ("doc_samples", True)])
def test_bad_refinement_parameters_are_refused(corpus, fitted, tmp_path, name, bad):
    with pytest.raises(ValueError, match=name):
        AVIPAM(arch="4pam:2,6", **{**KW, name: bad}).fit(corpus)
    fitted.save(tmp_path / "m.npz")
    f = ck.read_model_file(tmp_path / "m.npz")
    header = {k: v for k, v in f.header.items() if k not in ("format", "format_version", "arrays")}
    header["params"] = dict(header["params"], **{name: bad})
    ck.write_model_file(tmp_path / "bad.npz", header, dict(f.arrays))
    with pytest.raises(ValueError, match=name):
        AVIPAM.load(tmp_path / "bad.npz")
    with pytest.raises(ValueError, match="n_samples"):
        fitted.elbo(corpus, n_samples=0)
    with pytest.raises(ValueError, match="refine_steps"):
        fitted.elbo(corpus, refine_steps=-2)


def test_mixtures_do_not_depend_on_the_thread_count(fitted, corpus):
    """Batches of documents are refined side by side, each with torch at one thread: the same
    mixtures and ELBOs bit for bit whatever n_jobs, over several batches."""
    import copy

    from models.avipam.foldin import REFINE_BATCH

    many = pam4_corpus(n_docs=2 * REFINE_BATCH + 100, doc_len=40, seed=3)[0]
    assert many.n_terms == corpus.n_terms
    before = torch.get_num_threads()
    mixes, elbos = [], []
    for n_jobs in (1, 2, 3):
        m = copy.copy(fitted)
        m.n_jobs = n_jobs
        mixes.append(m.transform(many))
        elbos.append(m.elbo(many, n_samples=4))
        assert torch.get_num_threads() == before  # restored
    for mix, elbo in zip(mixes[1:], elbos[1:]):
        np.testing.assert_array_equal(mix, mixes[0])
        np.testing.assert_array_equal(elbo, elbos[0])
    np.testing.assert_array_equal(copy.copy(fitted).transform(corpus), fitted.doc_mix_)


class _Heard:
    """A training callback that records the epochs and the stage reports it hears."""

    def __init__(self):
        self.epochs, self.stages = [], []

    def __call__(self, model, epoch, epochs):
        self.epochs.append(epoch)

    def stage(self, what, done, total):
        self.stages.append((what, done, total))


def test_the_posteriors_after_training_report_their_progress(capsys):
    from models.avipam.foldin import REFINE_BATCH
    from models.common.progress import TqdmCallback

    many = pam4_corpus(n_docs=REFINE_BATCH + 50, doc_len=20, seed=4)[0]
    heard = _Heard()
    kw = dict(KW, arch="4pam:2,6", epochs=2, n_chains=2, refine_steps=2, doc_samples=2, n_jobs=2)
    m = AVIPAM(**kw).fit(many, callback=heard)
    assert heard.epochs == [1, 2]
    # two batches a chain, reported as they are taken, after the last epoch
    assert heard.stages == [("document posteriors", i, 4) for i in range(1, 5)]
    bar = TqdmCallback(desc="AVIPAM")
    again = AVIPAM(**kw).fit(many, callback=bar)
    np.testing.assert_array_equal(again.doc_mix_, m.doc_mix_)
    assert bar._stage is None  # closed at the end
    assert "AVIPAM: document posteriors" in capsys.readouterr().err
