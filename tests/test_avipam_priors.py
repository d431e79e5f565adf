"""aviPAM's Dirichlet priors: the root's (``alpha_root``, by default 50 / its children, as Gibbs
PAM's alpha_r and LDA's alpha) and every lower node's (``alpha``); files and checkpoints written
before ``alpha_root`` existed keep ``alpha`` at the root."""
import numpy as np
import pytest
import torch

from models.common import checkpoint as ckpt
from models.avipam.model import AVIPAM
from models.common.corpus import make_corpus
from models.avipam.nets.pam_net import laplace_prior
from tests.helpers import checkpoint_before

KW = dict(arch="4pam:2,5", hidden=8, batch_size=20, lr=3e-3, epochs=2, n_jobs=1, alpha=1.0,
          alpha_root=1.0, topic_update="gradient", refine_steps=2, doc_samples=2, n_chains=1)


@pytest.fixture(scope="module")
def corpus():
    rng = np.random.default_rng(4)
    return make_corpus(np.arange(61) * 15, rng.integers(0, 40, 900), n_terms=40)


def _prior_vars(model, n_terms=30):
    from models.avipam.model import parse_arch

    net = model._build_net(n_terms)
    levels = range(len(parse_arch(model.arch).masks))
    return [(getattr(net, f"prior_var{l}"), getattr(net, f"mask{l}").sum(1, keepdim=True)) for l in levels]


@pytest.mark.parametrize("arch, alpha_root, want_root", [
    ("4pam:5,8", None, 10.0),      # 50 / 5 super-topics
    ("3pam:10", None, 5.0),        # LDA's 50 / K
    ("molda:3:4", None, 25.0),     # 50 / 2 components
    ("5pam:4,3,6", None, 12.5),
    ("4pam:5,8", 0.3, 0.3),
])
def test_the_root_has_its_own_prior_and_every_lower_node_alpha(arch, alpha_root, want_root):
    model = AVIPAM(arch=arch, alpha=0.02, alpha_root=alpha_root, hidden=4, n_chains=1)
    model._check_params()
    (root, kids), *lower = _prior_vars(model)
    want = laplace_prior(want_root, kids.to(torch.float32))[1].expand(root.shape)
    torch.testing.assert_close(root, want)
    for var, kids in lower:  # every node's prior over its own children (a MoLDA's differ)
        torch.testing.assert_close(var, laplace_prior(0.02, kids.to(torch.float32))[1].expand(var.shape))


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), "x"])
def test_a_bad_root_prior_is_refused_by_name(bad, corpus):
    with pytest.raises(ValueError, match="alpha_root"):
        AVIPAM(**dict(KW, alpha_root=bad)).fit(corpus)


def test_files_written_before_alpha_root_keep_alpha_at_the_root(corpus, tmp_path):
    model = AVIPAM(**KW).fit(corpus)
    path = tmp_path / "avi.npz"
    model.save(path)
    f = ckpt.read_model_file(path)
    header = {k: v for k, v in f.header.items() if k not in ("format", "format_version", "arrays")}
    header["params"] = {k: v for k, v in header["params"].items() if k != "alpha_root"}
    ckpt.write_model_file(tmp_path / "old.npz", header, dict(f.arrays))
    back = AVIPAM.load(tmp_path / "old.npz", fingerprint=corpus.fingerprint)
    assert back.alpha_root == back.alpha == 1.0
    terms = np.arange(corpus.n_terms)
    np.testing.assert_array_equal(back.p_w_d(terms), model.p_w_d(terms))


def test_checkpoints_written_before_alpha_root_resume_with_alpha_at_the_root(corpus, tmp_path):
    kw = dict(KW, epochs=4, checkpoint_every=2)
    want = AVIPAM(**kw).fit(corpus)
    path = tmp_path / "old.ckpt"
    checkpoint_before(AVIPAM, kw, corpus, path, 2, ("alpha_root",))
    with pytest.raises(ValueError, match="alpha_root"):  # now's default is 50 / 2, not alpha
        AVIPAM(**dict(kw, alpha_root=None)).fit(corpus, checkpoint=path)
    got = AVIPAM(**kw).fit(corpus, checkpoint=path)
    np.testing.assert_array_equal(got.topic_word_, want.topic_word_)
    np.testing.assert_array_equal(got.doc_mix_, want.doc_mix_)
