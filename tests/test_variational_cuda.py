"""The torch-trained models on a GPU (``device="cuda"``): what avipam.md promises of them (a model
per seed run to run, checkpoints, files that load on a machine without a GPU, the sparse first
layers' gradients). Skipped where torch sees no CUDA device, as on CI."""
import numpy as np
import pytest

from models.avipam.model import AVIPAM
from models.common.variational import count_matrix
from tests.helpers import resume_after_kill
from tests.test_avipam import KW, matched_cosines, pam4_corpus

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device")

CUDA = dict(KW, device="cuda")
ARCHS = [("4pam:2,6", "mixture", "gradient"), ("4pam:2,6", "mixture", "auto"),
         ("4pam:2,6", "product", "gradient"), ("ctm:6", "mixture", "gradient"),
         ("molda:2:3", "product", "gradient")]


@pytest.fixture(scope="module")
def corpus_beta():
    return pam4_corpus()


def test_learns_the_known_4pam_as_on_the_cpu(corpus_beta):
    corpus, beta = corpus_beta
    gpu = AVIPAM(epochs=40, **CUDA).fit(corpus)
    cpu = AVIPAM(epochs=40, **KW).fit(corpus)
    assert matched_cosines(gpu.topic_word_, beta).min() > 0.9
    # not the CPU's model, but one as good: final ELBOs per token within 2%
    assert abs(gpu.log_lik_[-1, 0] - cpu.log_lik_[-1, 0]) < 0.02 * abs(cpu.log_lik_[-1, 0])
    np.testing.assert_allclose(gpu.doc_mix_.sum(1), 1.0, atol=1e-5)


@pytest.mark.parametrize("arch, decoder, topic_update", ARCHS)
def test_same_seed_same_model_run_to_run(corpus_beta, arch, decoder, topic_update):
    kw = dict(CUDA, arch=arch, decoder=decoder, topic_update=topic_update, epochs=3,
              n_chains=2 if decoder == "mixture" else 1)
    a = AVIPAM(**kw).fit(corpus_beta[0])
    b = AVIPAM(**kw).fit(corpus_beta[0])
    for name in ("topic_word_", "doc_mix_", "log_lik_"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


def test_checkpoint_resumes_bit_identically(corpus_beta, tmp_path):
    kw = dict(CUDA, epochs=6, checkpoint_every=2)
    want = AVIPAM(**kw).fit(corpus_beta[0])
    got = resume_after_kill(AVIPAM, kw, corpus_beta[0], tmp_path / "avi.ckpt", kill_at=3)
    for name in ("topic_word_", "doc_mix_", "log_lik_", "sample_iter_"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)


def test_a_gpu_model_file_loads_and_transforms_on_a_machine_without_one(corpus_beta, tmp_path, monkeypatch):
    corpus = corpus_beta[0]
    m = AVIPAM(epochs=5, **CUDA).fit(corpus)
    path = tmp_path / "avi.npz"
    m.save(path)
    on_gpu = AVIPAM.load(path, fingerprint=corpus.fingerprint)
    assert on_gpu.device == "cuda"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    back = AVIPAM.load(path, fingerprint=corpus.fingerprint)
    assert back.device == "cpu" and next(back.net_.parameters()).device.type == "cpu"
    terms = np.arange(corpus.n_terms)
    np.testing.assert_array_equal(back.p_w_d(terms), m.p_w_d(terms))
    # one encoder pass gives the GPU's mixtures to float32 rounding; refined mixtures and their
    # samples draw from the device's random stream, so they differ by the sampling noise only
    for model in (back, m):
        model.refine_steps, model.doc_samples = 0, 0
    np.testing.assert_allclose(back.transform(corpus), m.transform(corpus), atol=1e-4)


@pytest.mark.parametrize("arch, decoder, topic_update", ARCHS)
def test_sparse_first_layer_gradients_match_the_dense_batch(corpus_beta, arch, decoder, topic_update):
    from models.avipam.nets.docs import Docs

    kw = dict(CUDA, arch=arch, decoder=decoder, topic_update=topic_update, epochs=1, refine_steps=0)
    net = AVIPAM(**kw).fit(corpus_beta[0]).net_.train()
    X = count_matrix(corpus_beta[0])[:40]
    dense = torch.from_numpy(X.toarray()).cuda()
    docs = Docs.from_csr(X, "cuda")
    got = {}
    for name, x in (("dense", dense), ("docs", docs)):
        net.zero_grad()
        neg_elbo, _ = net.loss(x, torch.Generator(device="cuda").manual_seed(4))
        neg_elbo.sum().backward()
        net.dense_grads()
        got[name] = (neg_elbo.detach(), {k: p.grad.clone() for k, p in net.named_parameters()})
    (e1, g1), (e2, g2) = got["dense"], got["docs"]
    torch.testing.assert_close(e2, e1, rtol=1e-5, atol=1e-4)
    scale = max(float(g.abs().max()) for g in g1.values())
    for k in g1:
        torch.testing.assert_close(g2[k], g1[k], rtol=1e-4, atol=1e-5 * scale, msg=k)
