"""A growing index (``topicir index --add``) and models of its earlier state ranking it."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from models.common.atomic import LockedError, target_lock
from retrieval.core.extension import ExtendedModel, document_model
from retrieval.core.index import Index, add_documents, build_index
from retrieval.core.modelfiles import load_model, train_model
from retrieval.core.ranking import prepare, run_topics
from retrieval.core.scoring import explain
from retrieval.core.trec import Topic
from retrieval.ui.cli import main

BLOCKS = [["apple", "banana", "cherry", "grape", "melon", "peach"],
          ["engine", "piston", "turbine", "valve", "torque", "gear"],
          ["violin", "cello", "sonata", "melody", "rhythm", "choir"]]


def trec(docs) -> str:
    return "".join(f"<DOC>\n<DOCNO> {docno} </DOCNO>\n<TEXT>{text}</TEXT>\n</DOC>\n" for docno, text in docs)


def make_docs(n, start, seed, new_words=()):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(start, start + n):
        words = list(rng.choice(BLOCKS[i % 3], size=12)) + list(new_words)
        out.append((f"D{i:03d}", " ".join(words)))
    return out


@pytest.fixture(scope="module")
def grown(tmp_path_factory):
    """An index of 30 documents, an LDA model of it, the index grown by 9 documents (some with
    words the model never saw) and the same 39 documents built at once."""
    root = tmp_path_factory.mktemp("grow")
    old, added = make_docs(30, 0, 1), make_docs(9, 30, 2, new_words=("zeppelin",))
    (root / "old.trec").write_text(trec(old))
    (root / "added.trec").write_text(trec(added))
    (root / "all.trec").write_text(trec(old + added))
    base = build_index([root / "old.trec"], root / "base")
    model, path = train_model(base, "lda", root / "lda.npz", n_topics=3, alpha=0.1, n_chains=1, n_iter=30, burn_in=20,
                              sample_every=5, seed=0, progress=False)
    build_index([root / "old.trec"], root / "idx")
    grown = add_documents([root / "added.trec"], root / "idx")
    whole = build_index([root / "all.trec"], root / "whole")
    return dict(root=root, base=base, grown=grown, whole=whole, model=model, path=path)


def test_append_equals_a_build_of_all_documents_at_once(grown):
    base, g, whole = grown["base"], grown["grown"].stats, grown["whole"].stats
    assert g.docnos == whole.docnos and g.docnos[:30] == base.stats.docnos
    assert g.terms == whole.terms and "zeppelin" in g.terms and "zeppelin" not in base.stats.terms
    for name in ("doc_ptr", "term_ids", "positions", "post_ptr", "post_doc", "post_tf"):
        np.testing.assert_array_equal(getattr(g, name), getattr(whole, name), err_msg=name)
    np.testing.assert_array_equal(g.cf, whole.cf)
    # the old documents keep their rows and tokens
    old = base.stats
    np.testing.assert_array_equal(g.doc_len[:30], old.doc_len)
    assert [g.terms[t] for t in g.term_ids[:g.doc_ptr[30]]] == [old.terms[t] for t in old.term_ids]
    m = grown["grown"].manifest
    assert m["fingerprint"] == whole.fingerprint != base.fingerprint
    assert m["parents"] == [{"fingerprint": base.fingerprint, "n_docs": 30, "n_terms": old.n_terms,
                             "n_tokens": old.n_tokens}]
    assert m["n_docs"] == 39 and m["n_added_docs"] == 9 and len(m["sources"]) == 2
    # Lucene holds the added documents too
    assert grown["grown"].document("D035")["contents"].endswith("zeppelin")


def test_duplicate_docno_is_refused_with_file_and_line(grown, tmp_path):
    idx = grown["root"] / "idx"
    before = (idx / "topicir.json").read_text()
    dup = tmp_path / "dup.trec"
    dup.write_text(trec([("N1", "apple engine")]) + trec([("D003", "violin")]))
    with pytest.raises(ValueError, match=rf"{dup}:5: DOCNO 'D003' is already in the index"):
        add_documents([dup], idx)
    assert (idx / "topicir.json").read_text() == before
    assert not [p for p in idx.parent.iterdir() if p.name.startswith(".idx.")]


def test_failed_append_leaves_the_old_index(grown, tmp_path, monkeypatch):
    import retrieval.core.index as index_mod

    build_index([grown["root"] / "old.trec"], tmp_path / "idx")
    before = Index(tmp_path / "idx")
    files = sorted(p.name for p in (tmp_path / "idx").iterdir())

    def killed(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(index_mod, "_append_lucene", killed)
    with pytest.raises(KeyboardInterrupt):
        add_documents([grown["root"] / "added.trec"], tmp_path / "idx")
    after = Index(tmp_path / "idx")
    assert after.manifest == before.manifest and after.stats.docnos == before.stats.docnos
    assert sorted(p.name for p in (tmp_path / "idx").iterdir()) == files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]
    with target_lock(tmp_path / "idx", what="index"), pytest.raises(LockedError, match="another process"):
        add_documents([grown["root"] / "added.trec"], tmp_path / "idx")


def test_kill_9_during_append_leaves_the_old_index(grown, tmp_path):
    build_index([grown["root"] / "old.trec"], tmp_path / "idx")
    before = (tmp_path / "idx" / "topicir.json").read_text()
    big = tmp_path / "big.trec"
    big.write_text(trec((f"B{i}", f"airbus rail strike number {i}") for i in range(100_000)))
    proc = subprocess.Popen([sys.executable, "-m", "retrieval", "-q", "index", "--add", str(big), "--index",
                             str(tmp_path / "idx")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and not list(tmp_path.glob(".idx.jsonl-*/docs-*")):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (tmp_path / "idx" / "topicir.json").read_text() == before
    assert Index(tmp_path / "idx").stats.n_docs == 30
    # the next append removes what the killed one left
    add_documents([grown["root"] / "added.trec"], tmp_path / "idx")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.trec", "idx"]


def test_model_of_the_old_index_ranks_the_grown_one(grown):
    model, g = grown["model"], grown["grown"]
    ext = load_model(grown["path"], g)
    assert isinstance(ext, ExtendedModel) and ext.n_model_docs == 30 and ext.n_added == 9
    assert document_model(model, g).n_added == 9 and document_model(model, grown["base"]) is model
    words = ["appl", "engin", "violin", "zeppelin"]
    ids = np.array([g.stats.term_index[w] for w in words])
    p = ext.p_w_d(ids)
    old_ids = np.array([grown["base"].stats.term_index[w] for w in words[:3]])
    # the old documents: the model's own P_TM, bit for bit; a term it never saw: 0
    np.testing.assert_array_equal(p[:30, :3], model.p_w_d(old_ids))
    assert (p[:, 3] == 0).all()
    # the added documents: fold-in of their tokens (seed 0), the unseen word left out
    s, base = g.stats, grown["base"].stats
    docs = [np.array([base.term_index[s.terms[t]] for t in s.term_ids[s.doc_ptr[d]:s.doc_ptr[d + 1]]
                      if s.terms[t] in base.term_index]) for d in range(30, 39)]
    np.testing.assert_array_equal(p[30:, :3], model.fold_in(docs, seed=0).p_w_d(old_ids))
    # an added music document is about music: its best topic is the one of the old music documents
    assert ext.doc_topics(32, top=1)[0][0] == model.doc_topics(2, top=1)[0][0]


def test_runs_on_the_grown_index_match_the_term_by_term_twin(grown):
    g, model = grown["grown"], grown["model"]
    run = run_topics(g, [Topic("1", "violin zeppelin melody", "", "")], model=model, mu=1000, lam=0.7, depth=39,
                     progress=False)
    prepared = prepare(g, "violin zeppelin melody", model)
    ext = load_model(grown["path"], g)
    for hit in run:
        doc = g.stats.doc_index[hit.docno]
        p_tm = ext.p_w_d(prepared.query.term_ids)[doc]
        want = sum(t.score for t in explain(g.stats, prepared.query, doc, 1000.0, 0.7, p_tm))
        assert hit.score == pytest.approx(want, rel=1e-12)
    assert len(run) == 39
    # folded in, the added music documents are the ones whose topics give "violin" weight
    p_violin = ext.p_w_d([g.stats.term_index["violin"]])[30:, 0]
    assert p_violin[[2, 5, 8]].min() > 5 * np.delete(p_violin, [2, 5, 8]).max()


def test_unrelated_index_is_refused(grown, tmp_path):
    (tmp_path / "other.trec").write_text(trec(make_docs(5, 0, 9)))
    other = build_index([tmp_path / "other.trec"], tmp_path / "other")
    with pytest.raises(ValueError, match="was trained on a corpus with fingerprint"):
        load_model(grown["path"], other)
    assert document_model(grown["model"], other) is grown["model"]


def test_cli_add_and_run(grown, tmp_path, capsys, caplog):
    idx = tmp_path / "idx"
    assert main(["-q", "index", str(grown["root"] / "old.trec"), "--out", str(idx)]) == 0
    assert main(["-q", "index", "--add", str(grown["root"] / "added.trec"), "--index", str(idx)]) == 0
    assert "9 documents added to 30; now 39 documents" in capsys.readouterr().out
    assert json.loads((idx / "topicir.json").read_text())["fingerprint"] == grown["grown"].fingerprint
    assert main(["-q", "index", "--add", str(grown["root"] / "added.trec"), "--out", str(idx)]) == 2
    assert "give it as --index DIR" in capsys.readouterr().err
    topics = tmp_path / "topics.tsv"
    topics.write_text("1\tviolin melody\n")
    with caplog.at_level("INFO"):
        assert main(["run", "--index", str(idx), "--topics", str(topics), "--model", str(grown["path"]),
                     "--out", str(tmp_path / "run.txt")]) == 0
    assert "folded in 9 documents in" in caplog.text
    assert len((tmp_path / "run.txt").read_text().splitlines()) == 39


def test_heldout_likelihood_of_the_added_documents(grown, capsys):
    from models.common.heldout import document_completion

    from retrieval.core.infer import heldout_likelihood

    model, g, base = grown["model"], grown["grown"], grown["base"]
    ext = load_model(grown["path"], g)
    want = document_completion(model, ext.added_docs(), seed=0)
    assert heldout_likelihood(model, g) == want
    assert want.n_docs == 9 and want.n_scored + want.n_observed == 9 * 12  # zeppelin left out
    # the same documents from their file, analysed by the model's own index or the grown one
    assert heldout_likelihood(model, base, [grown["root"] / "added.trec"]) == want
    assert heldout_likelihood(ext, g, [grown["root"] / "added.trec"]) == want
    with pytest.raises(ValueError, match="no document was added after training; give held-out documents"):
        heldout_likelihood(model, base)
    assert main(["-q", "heldout", "--model", str(grown["path"]), "--index", str(g.path)]) == 0
    out = capsys.readouterr().out
    assert f"held-out log-likelihood per token  {want.log_lik:.4f}" in out
    assert f"perplexity                         {np.exp(-want.log_lik):.1f}" in out and "seed=0" in out
    assert main(["-q", "heldout", "--model", str(grown["path"]), "--index", str(base.path)]) == 2
    assert "give held-out documents (--docs FILE)" in capsys.readouterr().err


def test_tcm_folds_in_added_documents_with_their_splits(tmp_path):
    """A TCM model of an earlier state folds the added documents in with the splits training
    gets from the index (punctuation, stopwords), and a split before every term it never saw."""
    from retrieval.adapters import tcm as tcm_adapter

    (tmp_path / "old.trec").write_text(trec(make_docs(30, 0, 1)))
    (tmp_path / "added.trec").write_text(trec([("N1", "apple banana, cherry zeppelin grape melon. peach of apple"),
                                               ("N2", "engine piston valve gear aardvark")]))
    base = build_index([tmp_path / "old.trec"], tmp_path / "base")
    model, path = train_model(base, "tcm", tmp_path / "tcm.npz", n_topics=3, n_chains=1, n_iter=12, burn_in=6,
                              sample_every=3, seed=0, progress=False)
    build_index([tmp_path / "old.trec"], tmp_path / "idx")
    g = add_documents([tmp_path / "added.trec"], tmp_path / "idx")
    ext = load_model(path, g)
    split = tcm_adapter.fold_in_inputs(g, model, 30, ext.to_model)["split"]
    # N1 as the model knows it: appl banana | cherri | grape melon | peach | appl (zeppelin left out)
    assert [len(d) for d in ext.added_docs()] == [7, 4] and g.stats.terms[0] == "aardvark"
    assert split[:7].tolist() == [0, 1, 1, 0, 1, 1, 1] and split[7:10].tolist() == [0, 0, 0]
    ids = np.array([g.stats.term_index[w] for w in ("appl", "banana", "engin")])
    want = model.fold_in(ext.added_docs(), seed=0, samples=None, split=split).p_w_d(ext.to_model[ids])
    np.testing.assert_array_equal(ext.p_w_d(ids)[30:], want)

    # a query's collocations: segmented in the model's term ids (the index's are shifted by the
    # new "aardvark"), P_TCM(c|d) of the model's documents, then of the folded-in ones
    b = base.stats
    c = [b.terms[w] for w in model.collocation_terms(model.top_collocations(1, min_len=2)[0][0])]
    text = " ".join(c + ["zeppelin"])
    grown_q, base_q = prepare(g, text, ext), prepare(base, text, model)
    assert grown_q.extra.labels == base_q.extra.labels == [" ".join(c)]
    np.testing.assert_array_equal(grown_q.p_extra[:30], base_q.p_extra)
    seg = np.array([0, len(c)])
    np.testing.assert_array_equal(grown_q.p_extra[30:], ext.folded.p_c_d(ext.to_model[[g.stats.term_index[t] for t in c]], seg))
    assert len(run_topics(g, [Topic("1", text, "", "")], model=ext, depth=32, progress=False)) == 32

def test_rows_of_a_grown_index_mix_the_models_and_the_folded_documents(grown):
    g = grown["grown"]
    ext = load_model(grown["path"], g)
    ids = np.array([g.stats.term_index[w] for w in ("appl", "zeppelin", "violin")])
    docs = np.array([35, 3, 38, 0, 35])
    np.testing.assert_allclose(ext.p_w_d_rows(ids, docs), ext.p_w_d(ids)[docs], rtol=1e-12)

