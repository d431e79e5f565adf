"""aviPAM's first layers (models.avipam.nets.term_layer.TermLayer): term-major weights with sparse
gradients made dense for Adam, and files written with the earlier (width, V) layout."""
import numpy as np
import pytest
from scipy import sparse

pytest.importorskip("torch")

from models.common import checkpoint as ck  # noqa: E402
from models.avipam.model import AVIPAM  # noqa: E402
from models.common.variational import count_matrix  # noqa: E402
from tests.helpers import Killed  # noqa: E402
from tests.test_avipam import KW, pam4_corpus  # noqa: E402


@pytest.fixture(scope="module")
def corpus():
    return pam4_corpus(n_docs=120)[0]


def _old_layout(arrays, param_names=(), em=False):
    """What an earlier version wrote: ``fc1.weight`` (width, V), Adam's moments alike, and for
    M-step topics the epoch's expected counts (K, V), zero at every save."""
    out = dict(arrays)
    for key in [k for k in out if k.endswith(".beta")] if em else []:
        out[key[:-len("beta")] + "em_counts"] = np.zeros_like(out[key])
    for key in [k for k in out if k.endswith(".fc1.rows")]:
        out[key[:-len("rows")] + "weight"] = np.ascontiguousarray(out.pop(key).T)
        name = key[len("net."):]
        if name in param_names:
            i = list(param_names).index(name)
            for moment in ("exp_avg", "exp_avg_sq"):
                out[f"opt.{i}.{moment}"] = np.ascontiguousarray(out[f"opt.{i}.{moment}"].T)
    return out


def test_dense_gradients_of_consecutive_batches_are_each_batch_s_own(corpus):
    """The buffer Adam reads is cleared where the previous batch wrote: after every batch it
    equals the gradient of that batch through dense counts (float32 rounding)."""
    import torch

    from models.avipam.nets.docs import Docs

    net = AVIPAM(epochs=1, **KW).fit(corpus).net_.train()
    X = count_matrix(corpus).tocsc()
    V = X.shape[1]
    # batches over disjoint terms, then one over all: every batch leaves rows of the last one
    batches = [X[:30, :V // 2], X[30:60, V // 2:], X[:10]]
    batches = [sparse.hstack([b, sparse.csc_matrix((b.shape[0], V - b.shape[1]))]) if i == 0 else
               sparse.hstack([sparse.csc_matrix((b.shape[0], V - b.shape[1])), b]) if i == 1 else b
               for i, b in enumerate(batches)]
    for i, batch in enumerate(batches):
        batch = sparse.csr_matrix(batch, dtype=np.float32)
        got = {}
        # training batches (by_term) and an embedding_bag batch between them
        docs = Docs.from_csr(batch, by_term=i != 1)
        for name, x in (("dense", torch.from_numpy(batch.toarray())), ("docs", docs)):
            net.zero_grad()
            net.loss(x, torch.Generator().manual_seed(1))[0].sum().backward()
            net.dense_grads()
            got[name] = {k: p.grad.clone() for k, p in net.named_parameters()}
        # float32 sums in another order: to 1e-5 of the largest gradient entry
        scale = max(float(g.abs().max()) for g in got["dense"].values())
        for k in got["dense"]:
            assert not got["docs"][k].is_sparse
            torch.testing.assert_close(got["docs"][k], got["dense"][k], rtol=1e-4, atol=1e-5 * scale, msg=k)
        unused = np.setdiff1d(np.arange(V), batch.indices)
        assert len(unused) or i == len(batches) - 1
        for enc in range(2):
            assert not got["docs"][f"encoders.{enc}.fc1.rows"][unused].any()


@pytest.mark.parametrize("topic_update", ["gradient", "em"])
def test_model_files_of_the_earlier_layout_load_alike(corpus, tmp_path, topic_update):
    model = AVIPAM(epochs=2, **dict(KW, topic_update=topic_update)).fit(corpus)
    model.save(tmp_path / "new.npz")
    f = ck.read_model_file(tmp_path / "new.npz")
    header = {k: v for k, v in f.header.items() if k not in ("format", "format_version", "arrays")}
    old = _old_layout(f.arrays, em=topic_update == "em")
    assert any(k.endswith(".fc1.weight") for k in old) and not any(k.endswith(".fc1.rows") for k in old)
    assert any(k.endswith(".em_counts") for k in old) == (topic_update == "em")
    ck.write_model_file(tmp_path / "old.npz", header, old)
    a, b = (AVIPAM.load(tmp_path / n, fingerprint=corpus.fingerprint) for n in ("new.npz", "old.npz"))
    for (k, x), (_, y) in zip(a.net_.state_dict().items(), b.net_.state_dict().items()):
        np.testing.assert_array_equal(x.numpy(), y.numpy(), err_msg=k)
    np.testing.assert_array_equal(a.transform(corpus), b.transform(corpus))


@pytest.mark.parametrize("topic_update", ["gradient", "em"])
def test_checkpoints_of_the_earlier_layout_resume_alike(corpus, tmp_path, topic_update):
    kw = dict(KW, epochs=4, checkpoint_every=2, topic_update=topic_update)
    path = tmp_path / "avi.ckpt"

    def kill(model, it, n_iter):
        if it == 2:
            raise Killed

    with pytest.raises(Killed):
        AVIPAM(**kw).fit(corpus, callback=kill, checkpoint=path)
    f = ck.read_model_file(path, kind=ck.CHECKPOINT_FORMAT)
    names = [n for n, _ in AVIPAM(**kw)._make_net(corpus.n_terms).named_parameters()]
    header = {k: v for k, v in f.header.items() if k not in ("format", "format_version", "arrays")}
    old = tmp_path / "old.ckpt"
    ck.write_model_file(old, header, _old_layout(f.arrays, names, em=topic_update == "em"), kind=ck.CHECKPOINT_FORMAT)
    want = AVIPAM(**kw).fit(corpus, checkpoint=path)
    got = AVIPAM(**kw).fit(corpus, checkpoint=old)
    for name in ("topic_word_", "doc_mix_", "log_lik_"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
