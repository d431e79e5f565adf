"""Table 1 of Hu & Boyd-Graber (2012) on 20 Newsgroups: seconds per sweep of every tree-LDA
sampler (one chain, one thread, sequential document-order sweeps) from the same random start.

Vocabulary: the top-V terms by mean tf-idf (tf-idf of a term averaged over the documents that
contain it), the corpus cut to them. Correlations: C synsets drawn at random (seeded) among the
WordNet 3.0 synsets with >= 2 vocabulary words, one subtree each (the paper's tree, no merging).
Priors: per-edge, beta_root 0.01 per leaf, beta_synset 100; alpha = 50 / T.

    python -m retrieval.bench.tree_lda --data /work/shared/data/20news/20news-bydate.tar.gz \
        --iters 10 --vary T --values 50 100 200 500
"""
import argparse
import time

import numpy as np

from models._kernels import tree_lda as TK
from models._kernels.rng import make_rng_states
from models.corpus import make_corpus
from models.tree import build_tree
from retrieval.datasets import wordnet
from retrieval.datasets.newsgroups import newsgroups_corpus


def top_tfidf(corpus, V):
    """Ids of the V terms of highest mean tf-idf over the documents containing them."""
    doc = np.repeat(np.arange(corpus.n_docs), np.diff(corpus.doc_ptr))
    pair = doc.astype(np.int64) * corpus.n_terms + corpus.term_ids
    keys, tf = np.unique(pair, return_counts=True)
    term = keys % corpus.n_terms
    df = np.bincount(term, minlength=corpus.n_terms)
    idf = np.log(corpus.n_docs / np.maximum(df, 1))
    mean = np.bincount(term, weights=tf * idf[term], minlength=corpus.n_terms) / np.maximum(df, 1)
    return np.argsort(-mean, kind="stable")[:V]


def setup(corpus, vocab, synsets, V, C, seed=0):
    """The corpus cut to the top-V terms (renumbered) and the C-synset tree over them."""
    keep = top_tfidf(corpus, V)
    new = np.full(corpus.n_terms, -1, dtype=np.int64)
    new[keep] = np.arange(len(keep))
    t = new[corpus.term_ids]
    mask = t >= 0
    doc = np.repeat(np.arange(corpus.n_docs), np.diff(corpus.doc_ptr))[mask]
    doc_ptr = np.concatenate([[0], np.cumsum(np.bincount(doc, minlength=corpus.n_docs))])
    cut = make_corpus(doc_ptr, t[mask].astype(np.int32), n_terms=len(keep), fingerprint=f"bench:{V}")
    ids = {vocab[o]: i for i, o in enumerate(keep)}
    cands = sorted(set(wordnet.synsets_as_terms(synsets, ids.get)))
    pick = np.random.default_rng(seed).permutation(len(cands))[:C]
    return cut, build_tree([cands[i] for i in sorted(pick)], len(keep)), len(cands)


def time_sampler(variant, corpus, tree, T, iters, seed):
    """Mean seconds per sweep over ``iters`` sweeps (after numba compilation on a tiny run)."""
    rng0 = np.random.default_rng(seed)
    N = corpus.n_tokens
    z = rng0.integers(0, T, N).astype(np.int32)
    ptr = tree.word_path_ptr
    zp = (ptr[corpus.term_ids] + (rng0.random(N) * np.diff(ptr)[corpus.term_ids])).astype(np.int64)
    alpha = np.full(T, 50.0 / T)
    n_e = np.zeros((tree.n_nodes, T), np.int32)
    n_i = np.zeros((tree.n_nodes, T), np.int32)
    n_dk = np.zeros((corpus.n_docs, T), np.int32)
    inv = np.zeros((tree.n_nodes, T))
    doc = np.repeat(np.arange(corpus.n_docs), np.diff(corpus.doc_ptr))
    np.add.at(n_dk, (doc, z), 1)
    for l in range(tree.path_edges.shape[1]):
        e = tree.path_edges[zp, l]
        m = e >= 0
        np.add.at(n_e, (e[m], z[m]), 1)
        np.add.at(n_i, (tree.parent[e[m]], z[m]), 1)
    with np.errstate(divide="ignore"):
        inv[:] = 1.0 / (tree.beta_sum[:, None] + n_i)
    bound = TK.path_bound(tree, alpha)
    rng = make_rng_states(seed)
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        TK.sweep(variant, corpus.doc_ptr, corpus.term_ids, z, zp, ptr, tree.path_edges,
                 tree.path_len, tree.parent, tree.beta, tree.beta_sum, tree.path_prior(), bound,
                 n_e, n_i, n_dk, inv, alpha, rng)
        times.append(time.perf_counter() - t0)
    return float(np.mean(times))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m retrieval.bench.tree_lda", description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="/work/shared/data/20news/20news-bydate.tar.gz")
    ap.add_argument("--wordnet", default=None, help="WordNet 3.0 dict directory (default /usr/share/wordnet)")
    ap.add_argument("--vary", choices=("T", "V", "C"), default="T")
    ap.add_argument("--values", type=int, nargs="+", default=[100])
    ap.add_argument("--T", type=int, default=100)
    ap.add_argument("--V", type=int, default=10000)
    ap.add_argument("--C", type=int, default=100)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--samplers", nargs="+", default=list(TK.SAMPLERS), choices=TK.SAMPLERS)
    a = ap.parse_args(argv)
    corpus, vocab, _ = newsgroups_corpus(a.data)
    synsets = wordnet.read_synsets(a.wordnet)
    # compile every kernel on a tiny problem first
    tiny, ttree, _ = setup(corpus, vocab, synsets, 50, 5)
    for v in range(6):
        time_sampler(v, make_corpus(tiny.doc_ptr[:11], tiny.term_ids[:tiny.doc_ptr[10]], tiny.n_terms), ttree, 4, 1, 0)
    rows = {s: [] for s in a.samplers}
    for val in a.values:
        T, V, C = (val if a.vary == x else getattr(a, x) for x in ("T", "V", "C"))
        cut, tree, n_cand = setup(corpus, vocab, synsets, V, C)
        print(f"# {a.vary}={val}: T={T} V={V} C={len(tree.synsets)} of {n_cand} eligible synsets, "
              f"{cut.n_tokens} tokens, {a.iters} sweeps x {a.seeds} seeds", flush=True)
        for s in a.samplers:
            v = TK.SAMPLERS.index(s)
            rows[s].append(np.mean([time_sampler(v, cut, tree, T, a.iters, seed) for seed in range(a.seeds)]))
            print(f"  {s:12s} {rows[s][-1]:8.3f} s/iter", flush=True)
    print(f"\n{'sampler':12s} " + " ".join(f"{a.vary}{v:>8d}" for v in a.values))
    for s in a.samplers:
        print(f"{s:12s} " + " ".join(f"{x:9.3f}" for x in rows[s]))


if __name__ == "__main__":
    main()
