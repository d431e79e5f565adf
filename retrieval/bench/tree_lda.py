"""Table 1 of Hu & Boyd-Graber (2012) on 20 Newsgroups: seconds per sweep of every tree-LDA
sampler (one chain, one thread, sequential document-order sweeps), measured side by side.

Vocabulary: the top-V terms by average tf-idf over all documents (sum of tf * idf / D; averaging
only over the documents that contain a term would rank hapaxes first), the corpus cut to them.
Correlations: C synsets drawn at random (seeded) among the WordNet 3.0 synsets with >= 2
vocabulary words, one subtree each (the paper's tree, no merging). Priors: per-edge,
beta_root 0.01 per leaf, beta_synset 100; alpha = 50 / T.

Timing: every sampler starts from the same state (a seeded uniform random start, then ``--burn``
FAST-RB-SDW sweeps, as the paper's mean over 100 iterations is mostly over a settled chain), owns
its copy of it, and the samplers take turns sweep by sweep so that machine load hits all alike.

    python -m retrieval.bench.tree_lda --vary T --values 50 100 200 500 --burn 20 --iters 3
    python -m retrieval.bench.tree_lda --shards 2 --samplers naive fast-rb fast-rb-sdw   # both cores
    python -m retrieval.bench.tree_lda --lists 60   # list lengths and bucket shares along a chain
"""
import argparse
import os
import time

import numba
import numpy as np

from models._kernels import tree_lda as TK
from models._kernels.rng import make_rng_states
from models.corpus import make_corpus
from models.tree import build_tree
from models.tree_shards import sweep_chains, tree_shards
from retrieval.datasets import wordnet
from retrieval.datasets.newsgroups import newsgroups_corpus

# The paper's Table 1: seconds per iteration, samplers in TK.SAMPLERS order (6-core 2.8 GHz CPU,
# 100 iterations x 5 seeds), for each (varied dimension, value).
PAPER = {
    ("T", 50): (5.700, 4.935, 2.937, 2.675, 2.449, 2.225),
    ("T", 100): (12.655, 9.222, 4.037, 3.795, 3.363, 3.241),
    ("T", 200): (29.200, 17.559, 5.880, 5.400, 4.894, 4.672),
    ("T", 500): (71.223, 40.691, 8.551, 8.363, 7.404, 7.424),
    ("V", 5000): (4.815, 2.897, 1.012, 0.972, 0.889, 0.828),
    ("V", 10000): (12.351, 9.063, 3.900, 3.684, 3.376, 3.113),
    ("V", 20000): (28.783, 20.460, 9.777, 9.287, 8.406, 7.777),
    ("V", 30000): (51.088, 38.119, 20.040, 18.685, 16.640, 15.397),
    ("C", 50): (11.166, 8.889, 3.995, 3.660, 3.272, 3.026),
    ("C", 100): (12.586, 9.165, 4.078, 3.795, 3.363, 3.241),
    ("C", 200): (13.000, 9.177, 3.858, 3.593, 3.308, 3.091),
    ("C", 500): (15.377, 8.079, 3.156, 3.065, 2.787, 2.627),
}


def paper_ratios(vary, values, samplers):
    """NAIVE / sampler in the paper's Table 1, (samplers, values); nan where it has no figure."""
    out = np.full((len(samplers), len(values)), np.nan)
    for j, v in enumerate(values):
        row = PAPER.get((vary, v))
        if row is not None:
            for i, s in enumerate(samplers):
                out[i, j] = row[0] / row[TK.SAMPLERS.index(s)]
    return out


def top_tfidf(corpus, V):
    """Ids of the V terms of highest tf-idf averaged over all documents."""
    doc = np.repeat(np.arange(corpus.n_docs), np.diff(corpus.doc_ptr))
    pair = doc.astype(np.int64) * corpus.n_terms + corpus.term_ids
    keys, tf = np.unique(pair, return_counts=True)
    term = keys % corpus.n_terms
    df = np.bincount(term, minlength=corpus.n_terms)
    idf = np.log(corpus.n_docs / np.maximum(df, 1))
    mean = np.bincount(term, weights=tf * idf[term], minlength=corpus.n_terms) / corpus.n_docs
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


def chain_start(corpus, tree, T, seed):
    """(alpha, path bound, path prior, state) of a bench chain: alpha = 50 / T and a seeded
    uniform random (topic, path) per token with its counts, state = [z, zp, n_e, n_i, n_dk, inv]."""
    alpha = np.full(T, 50.0 / T)
    rng0 = np.random.default_rng(seed)
    N = corpus.n_tokens
    z = rng0.integers(0, T, N).astype(np.int32)
    ptr = tree.word_path_ptr
    zp = (ptr[corpus.term_ids] + (rng0.random(N) * np.diff(ptr)[corpus.term_ids])).astype(np.int64)
    n_e = np.zeros((tree.n_nodes, T), np.int32)
    n_i = np.zeros((tree.n_nodes, T), np.int32)
    n_dk = np.zeros((corpus.n_docs, T), np.int32)
    doc = np.repeat(np.arange(corpus.n_docs), np.diff(corpus.doc_ptr))
    np.add.at(n_dk, (doc, z), 1)
    for l in range(tree.path_edges.shape[1]):
        e = tree.path_edges[zp, l]
        m = e >= 0
        np.add.at(n_e, (e[m], z[m]), 1)
        np.add.at(n_i, (tree.parent[e[m]], z[m]), 1)
    with np.errstate(divide="ignore"):
        inv = 1.0 / (tree.beta_sum[:, None] + n_i)
    return alpha, TK.path_bound(tree, alpha), tree.path_prior(), [z, zp, n_e, n_i, n_dk, inv]


def one_sweep(variant, corpus, tree, state, alpha, bound, prior, rng, shards=None):
    """Seconds of one sweep of ``variant`` on ``state`` (changed in place). Sequential (no
    ``shards``): the kernel runs on one thread, so its process CPU time is what an idle core
    would take, whatever else runs. Sharded: wall-clock seconds of the S shards on numba's
    threads (``rng`` then holds S streams)."""
    z, zp, n_e, n_i, n_dk, inv = state
    if shards is not None:
        t0 = time.perf_counter()
        sweep_chains(variant, shards, z[None], zp[None], tree.word_path_ptr, tree.path_edges,
                     tree.path_len, tree.beta, tree.beta_sum, prior, bound[None], n_e[None],
                     n_i[None], n_dk[None], inv[None], alpha[None], rng[None])
        return time.perf_counter() - t0
    t0 = time.process_time()
    TK.sweep(variant, corpus.doc_ptr, corpus.term_ids, z, zp, tree.word_path_ptr, tree.path_edges,
             tree.path_len, tree.parent, tree.beta, tree.beta_sum, prior, bound, n_e, n_i, n_dk,
             inv, alpha, rng)
    return time.process_time() - t0


def time_samplers(variants, corpus, tree, T, iters, burn, seed, n_shards=1):
    """Mean seconds per sweep of each variant over ``iters`` sweeps taken in turns, each on its
    own copy of the state after ``burn`` FAST-RB-SDW sweeps from the seeded random start; with
    ``n_shards`` > 1 the timed sweeps are sharded (wall-clock)."""
    alpha, bound, prior, state = chain_start(corpus, tree, T, seed)
    rng = make_rng_states(seed, len(variants) + 1, n_shards)
    shards = tree_shards(corpus, tree, n_shards) if n_shards > 1 else None
    for _ in range(burn):
        one_sweep(TK.FAST_RB_SDW, corpus, tree, state, alpha, bound, prior, rng[-1, 0])
    states = [[a.copy() for a in state] for _ in variants]
    times = np.zeros((len(variants), iters))
    for it in range(iters):
        for i, v in enumerate(variants):
            times[i, it] = one_sweep(v, corpus, tree, states[i], alpha, bound, prior,
                                     rng[i] if shards else rng[i, 0], shards)
    return times.mean(1)


def list_trace(corpus, tree, T, sweeps, seed=0, every=5):
    """One FAST-RB chain from the seeded random start: after every ``every``-th sweep, the mean
    over tokens of the nonzero topics of the root edge on the token's path (its word's list), the
    same over the tokens of words with one path (no synset) and with several, and the mean over
    tokens of their document's nonzero topics; at the end each bucket's mean share of a one-path
    token's draw (with the token left in the counts). Prints them and returns (rows of (sweep,
    seconds, word, one-path word, several-path word, doc), shares); a mean over no tokens is nan."""
    alpha, bound, prior, state = chain_start(corpus, tree, T, seed)
    rng = make_rng_states(seed, 1)[0]
    ptr = tree.word_path_ptr
    dl = np.diff(corpus.doc_ptr)
    one = np.diff(ptr)[corpus.term_ids] == 1
    print(f"# tokens of words with several paths: {1 - one.mean():.3f}")
    print(f"{'sweep':>5s} {'s':>7s} {'word topics':>12s} {'one path':>9s} {'several':>8s} {'doc topics':>11s}")
    rows = []
    for it in range(1, sweeps + 1):
        t = one_sweep(TK.FAST_RB, corpus, tree, state, alpha, bound, prior, rng)
        if (it - 1) % every == 0 or it == sweeps:
            n_e, n_dk = state[2], state[4]
            nz = (n_e > 0).sum(1)[tree.path_edges[state[1], 0]]
            w1, w2 = (float(nz[m].mean()) if m.any() else np.nan for m in (one, ~one))
            doc = (dl * (n_dk > 0).sum(1)).sum() / dl.sum()
            rows.append((it, t, nz.mean(), w1, w2, doc))
            print(f"{it:5d} {t:7.3f} {nz.mean():12.2f} {w1:9.2f} {w2:8.2f} {doc:11.2f}", flush=True)
    n_e, n_dk, inv = state[2], state[4], state[5]
    w = corpus.term_ids[one]
    d = np.repeat(np.arange(corpus.n_docs), dl)[one]
    j = tree.path_edges[ptr[w], 0]
    root_inv = inv[int(TK.root_of(tree.parent))]
    s = tree.beta[j] * (alpha * root_inv).sum()
    r = tree.beta[j] * (n_dk[d] * root_inv).sum(1)
    q = ((alpha + n_dk[d]) * n_e[j] * root_inv).sum(1)
    tot = s + r + q
    shares = [float(np.mean(x / tot)) for x in (s, r, q)]
    print("bucket shares (one-path tokens): s {:.4f} r {:.4f} q {:.4f}".format(*shares))
    return rows, shares


def senses(tree):
    """Average number of paths (senses) of the words that sit in at least one synset."""
    n = np.diff(tree.word_path_ptr)
    return float(n[n > 1].mean()) if (n > 1).any() else 1.0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m retrieval.bench.tree_lda", description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="/work/shared/data/20news/20news-bydate.tar.gz")
    ap.add_argument("--wordnet", default=None, help="WordNet 3.0 dict directory (default /usr/share/wordnet)")
    ap.add_argument("--vary", choices=("T", "V", "C"), default="T")
    ap.add_argument("--values", type=int, nargs="+", default=[100])
    ap.add_argument("--T", type=int, default=100)
    ap.add_argument("--V", type=int, default=10000)
    ap.add_argument("--C", type=int, default=100)
    ap.add_argument("--iters", type=int, default=3, help="timed sweeps per sampler and seed")
    ap.add_argument("--burn", type=int, default=20, help="FAST-RB-SDW sweeps before timing")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--shards", type=int, default=1,
                    help="time sharded sweeps of S shards on numba's threads (wall-clock) instead "
                         "of sequential ones (CPU time)")
    ap.add_argument("--samplers", nargs="+", default=list(TK.SAMPLERS), choices=TK.SAMPLERS)
    ap.add_argument("--plot", default=None, help="PNG of seconds per sweep against the varied value")
    ap.add_argument("--lists", type=int, default=0, metavar="N",
                    help="instead of timing: N FAST-RB sweeps at T, V, C, printing list lengths "
                         "and bucket shares")
    a = ap.parse_args(argv)
    corpus, vocab, _ = newsgroups_corpus(a.data)
    synsets = wordnet.read_synsets(a.wordnet)
    tiny, ttree, _ = setup(corpus, vocab, synsets, 50, 5)  # compile every kernel on a tiny problem
    tiny = make_corpus(tiny.doc_ptr[:11], tiny.term_ids[:tiny.doc_ptr[10]], tiny.n_terms)
    time_samplers(list(range(6)), tiny, ttree, 4, 1, 1, 0, a.shards)
    if a.lists:
        cut, tree, _ = setup(corpus, vocab, synsets, a.V, a.C)
        print(f"# T={a.T} V={a.V} C={len(tree.synsets)}, {cut.n_tokens} tokens, FAST-RB, seed 0")
        list_trace(cut, tree, a.T, a.lists)
        return
    variants = [TK.SAMPLERS.index(s) for s in a.samplers]
    rows = np.zeros((len(variants), len(a.values)))
    xs = []
    for col, val in enumerate(a.values):
        T, V, C = (val if a.vary == x else getattr(a, x) for x in ("T", "V", "C"))
        cut, tree, n_cand = setup(corpus, vocab, synsets, V, C)
        xs.append(senses(tree))
        print(f"# {a.vary}={val}: T={T} V={V} C={len(tree.synsets)} of {n_cand} eligible synsets, "
              f"{xs[-1]:.2f} senses per correlated word, {cut.n_tokens} tokens, {a.burn} burn-in + "
              f"{a.iters} timed sweeps x {a.seeds} seeds, "
              f"{f'{a.shards} shards on {numba.get_num_threads()} threads (wall-clock), ' if a.shards > 1 else ''}"
              f"load average {os.getloadavg()[0]:.2f}",
              flush=True)
        rows[:, col] = np.mean([time_samplers(variants, cut, tree, T, a.iters, a.burn, seed, a.shards)
                                for seed in range(a.seeds)], axis=0)
        for s, x in zip(a.samplers, rows[:, col]):
            print(f"  {s:12s} {x:8.3f} s/sweep", flush=True)
    print_table("s/sweep", a.vary, a.values, a.samplers, rows, 3)
    if "naive" in a.samplers:
        print_table("NAIVE / x", a.vary, a.values, a.samplers, rows[a.samplers.index("naive")] / rows, 2)
        print_table("paper N / x", a.vary, a.values, a.samplers,
                    paper_ratios(a.vary, a.values, a.samplers), 2)
    if a.plot:
        plot(a.plot, a.vary, a.values, xs, a.samplers, rows)


def print_table(title, vary, values, samplers, rows, digits):
    """One summary table: a row per sampler, a column per varied value."""
    print(f"\n{title:12s} " + " ".join(f"{vary}{v:<8d}" for v in values))
    for s, r in zip(samplers, rows):
        print(f"{s:12s} " + " ".join(f"{x:9.{digits}f}" for x in r))


def plot(path, vary, values, senses_, samplers, rows):
    """Seconds per sweep against the varied value (and senses per correlated word for C)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5, 3.5))
    x = senses_ if vary == "C" else values
    for s, r in zip(samplers, rows):
        ax.plot(x, r, marker="o", label=s)
    ax.set_xlabel("average senses per correlated word" if vary == "C" else vary)
    ax.set_ylabel("seconds per sweep")
    if vary == "C":
        for xv, v in zip(x, values):
            ax.annotate(f"C={v}", (xv, rows[:, values.index(v)].max()), fontsize=7)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
