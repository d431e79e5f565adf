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

    topicir bench tree-lda --vary T --values 50 100 200 500 --burn 20 --iters 3
    topicir bench tree-lda --shards 2 --samplers naive fast-rb fast-rb-sdw   # both cores
    topicir bench tree-lda --lists 60   # list lengths and bucket shares along a chain
"""
import logging
import time

import numba
import numpy as np

from models.tree_lda import kernels as TK
from models.common.kernels.rng import make_rng_states
from models.common.corpus import make_corpus
from models.tree_lda.tree import build_tree
from models.tree_lda.shards import sweep_chains, tree_shards
from retrieval.datasets import wordnet
from retrieval.datasets.newsgroups import newsgroups_corpus

from ..core.tables import Table, fixed

log = logging.getLogger(__name__)

DEFAULT_20NEWS = "/work/shared/data/20news/20news-bydate.tar.gz"

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
    zp = (ptr[corpus.term_ids] + (rng0.random(N) * np.diff(ptr)[corpus.term_ids])).astype(np.int32)
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


def one_sweep(variant, corpus, tree, state, alpha, bound, prior, rng, shards=None, work=None):
    """Seconds of one sweep of ``variant`` on ``state`` (changed in place). Sequential (no
    ``shards``): the kernel runs on one thread, so its process CPU time is what an idle core
    would take, whatever else runs. Sharded: wall-clock seconds of the S shards on numba's
    threads (``rng`` then holds S streams). ``work``: the state's sweep tables and lists
    (:func:`models.tree_lda.kernels.sweep_work`), kept from sweep to sweep as training does;
    None: made, and timed, in this sweep."""
    z, zp, n_e, n_i, n_dk, inv = state
    if shards is not None:
        t0 = time.perf_counter()
        sweep_chains(variant, shards, z[None], zp[None], tree.word_path_ptr, tree.path_edges,
                     tree.path_len, tree.beta, tree.beta_sum, prior, bound[None], n_e[None],
                     n_i[None], n_dk[None], inv[None], alpha[None], rng[None],
                     work=None if work is None else [work])
        return time.perf_counter() - t0
    t0 = time.process_time()
    TK.sweep(variant, corpus.doc_ptr, corpus.term_ids, z, zp, tree.word_path_ptr, tree.path_edges,
             tree.path_len, tree.parent, tree.beta, tree.beta_sum, prior, bound, n_e, n_i, n_dk,
             inv, alpha, rng, work=work)
    return time.process_time() - t0


def state_work(tree, T, bound, prior):
    """A state's :func:`models.tree_lda.kernels.sweep_work` (tables and lists of the sparse
    samplers; NAIVE ignores it)."""
    return TK.sweep_work(tree.word_path_ptr, tree.path_edges, tree.path_len, tree.parent, tree.beta,
                         tree.beta_sum, prior, bound, T)


def time_samplers(variants, corpus, tree, T, iters, burn, seed, n_shards=1):
    """Mean seconds per sweep of each variant over ``iters`` sweeps taken in turns, each on its
    own copy of the state after ``burn`` FAST-RB-SDW sweeps from the seeded random start; with
    ``n_shards`` > 1 the timed sweeps are sharded (wall-clock)."""
    alpha, bound, prior, state = chain_start(corpus, tree, T, seed)
    rng = make_rng_states(seed, len(variants) + 1, n_shards)
    shards = tree_shards(corpus, tree, n_shards) if n_shards > 1 else None
    work = state_work(tree, T, bound, prior)
    for _ in range(burn):
        one_sweep(TK.FAST_RB_SDW, corpus, tree, state, alpha, bound, prior, rng[-1, 0], work=work)
    states = [[a.copy() for a in state] for _ in variants]
    works = [state_work(tree, T, bound, prior) for _ in variants]
    times = np.zeros((len(variants), iters))
    for it in range(iters):
        for i, v in enumerate(variants):
            times[i, it] = one_sweep(v, corpus, tree, states[i], alpha, bound, prior,
                                     rng[i] if shards else rng[i, 0], shards, works[i])
    return times.mean(1)


def list_trace(corpus, tree, T, sweeps, seed=0, every=5):
    """One FAST-RB chain from the seeded random start: after every ``every``-th sweep, the mean
    over tokens of the nonzero topics of the root edge on the token's path (its word's list), the
    same over the tokens of words with one path (no synset) and with several, and the mean over
    tokens of their document's nonzero topics; at the end each bucket's mean share of a one-path
    token's draw (with the token left in the counts). Returns (rows of (sweep,
    seconds, word, one-path word, several-path word, doc), shares); a mean over no tokens is nan."""
    alpha, bound, prior, state = chain_start(corpus, tree, T, seed)
    rng = make_rng_states(seed, 1)[0]
    work = state_work(tree, T, bound, prior)
    ptr = tree.word_path_ptr
    dl = np.diff(corpus.doc_ptr)
    one = np.diff(ptr)[corpus.term_ids] == 1
    log.info("tokens of words with several paths: %.3f", 1 - one.mean())
    rows = []
    for it in range(1, sweeps + 1):
        t = one_sweep(TK.FAST_RB, corpus, tree, state, alpha, bound, prior, rng, work=work)
        if (it - 1) % every == 0 or it == sweeps:
            n_e, n_dk = state[2], state[4]
            nz = (n_e > 0).sum(1)[tree.path_edges[state[1], 0]]
            w1, w2 = (float(nz[m].mean()) if m.any() else np.nan for m in (one, ~one))
            doc = (dl * (n_dk > 0).sum(1)).sum() / dl.sum()
            rows.append((it, t, nz.mean(), w1, w2, doc))
            log.info("sweep %d: %.3f s, %.2f word topics, %.2f doc topics", it, t, nz.mean(), doc)
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
    return rows, shares


def senses(tree):
    """Average number of paths (senses) of the words that sit in at least one synset."""
    n = np.diff(tree.word_path_ptr)
    return float(n[n > 1].mean()) if (n > 1).any() else 1.0


def run(*, data: str = DEFAULT_20NEWS, wordnet_dir: str | None = None, vary: str = "T", values=(100,),
        T: int = 100, V: int = 10000, C: int = 100, iters: int = 3, burn: int = 20, seeds: int = 1,
        shards: int = 1, samplers=tuple(TK.SAMPLERS), plot_path: str | None = None, lists: int = 0) -> list[Table]:
    """Seconds per sweep of every sampler of ``samplers`` with ``vary`` (T, V or C) taking each of
    ``values`` (the others fixed at ``T``, ``V``, ``C``), with the NAIVE / sampler ratios beside
    the paper's; with ``lists`` > 0, instead, list lengths and bucket shares along that many
    FAST-RB sweeps."""
    samplers, values = list(samplers), list(values)
    corpus, vocab, _ = newsgroups_corpus(data)
    synsets = wordnet.read_synsets(wordnet_dir)
    tiny, ttree, _ = setup(corpus, vocab, synsets, 50, 5)  # compile every kernel on a tiny problem
    tiny = make_corpus(tiny.doc_ptr[:11], tiny.term_ids[:tiny.doc_ptr[10]], tiny.n_terms)
    time_samplers(list(range(6)), tiny, ttree, 4, 1, 1, 0, shards)
    if lists:
        cut, tree, _ = setup(corpus, vocab, synsets, V, C)
        trace, shares = list_trace(cut, tree, T, lists)
        rows = [{"sweep": it, "s": fixed(t, 3), "word topics": fixed(w, 2), "one path": fixed(w1, 2),
                 "several": fixed(w2, 2), "doc topics": fixed(d, 2)} for it, t, w, w1, w2, d in trace]
        return [Table(f"Tree-LDA topic lists along a FAST-RB chain (T={T} V={V} C={len(tree.synsets)}, "
                      f"{cut.n_tokens} tokens, seed 0)", rows,
                      notes=["bucket shares (one-path tokens): s {:.4f} r {:.4f} q {:.4f}".format(*shares)])]
    variants = [TK.SAMPLERS.index(s) for s in samplers]
    rows = np.zeros((len(variants), len(values)))
    xs, notes = [], []
    for col, val in enumerate(values):
        t_, v_, c_ = (val if vary == x else {"T": T, "V": V, "C": C}[x] for x in ("T", "V", "C"))
        cut, tree, n_cand = setup(corpus, vocab, synsets, v_, c_)
        xs.append(senses(tree))
        notes.append(f"{vary}={val}: T={t_} V={v_} C={len(tree.synsets)} of {n_cand} eligible synsets, "
                     f"{xs[-1]:.2f} senses per correlated word, {cut.n_tokens} tokens")
        log.info("%s", notes[-1])
        rows[:, col] = np.mean([time_samplers(variants, cut, tree, t_, iters, burn, seed, shards)
                                for seed in range(seeds)], axis=0)
    how = (f"{burn} burn-in + {iters} timed sweeps x {seeds} seeds, "
           + (f"{shards} shards on {numba.get_num_threads()} threads (wall-clock)" if shards > 1
              else "one thread (CPU time)"))
    tables = [sampler_table("Tree-LDA seconds per sweep", vary, values, samplers, rows, 3, notes + [how])]
    if "naive" in samplers:
        tables.append(sampler_table("Tree-LDA speed-up: NAIVE / sampler", vary, values, samplers,
                                    rows[samplers.index("naive")] / rows, 2))
        tables.append(sampler_table("Hu & Boyd-Graber (2012) Table 1: NAIVE / sampler", vary, values, samplers,
                                    paper_ratios(vary, values, samplers), 2))
    if plot_path:
        plot(plot_path, vary, values, xs, samplers, rows)
    return tables


def sampler_table(title, vary, values, samplers, rows, digits, notes=()):
    """One summary table: a row per sampler, a column per varied value."""
    return Table(title, [{"sampler": s, **{f"{vary}={v}": float(x) for v, x in zip(values, r)}}
                         for s, r in zip(samplers, rows)], notes=list(notes), digits=digits)


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

