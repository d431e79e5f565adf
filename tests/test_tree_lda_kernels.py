"""Tree-LDA samplers (models/common/kernels/tree_lda*.py) against the slow twin (eq. 1 by enumeration)."""
import numpy as np
import pytest
from numba import config, njit

from models.tree_lda import kernels as T
from models.tree_lda import lists as TL
from models.tree_lda import sparse_kernels as TS
from models.tree_lda import tables as TT
from models.common.kernels.borrow import borrowed
from models.tree_lda.state import Chain, Runs, TreeArrays
from models.common.kernels.rng import make_rng_states
from models.tree_lda.tree import build_tree
from tests.reference import tree_lda_reference as ref

K, V = 5, 9
SYN = [[0, 1, 2], [1, 3], [4, 5], [2, 6, 7]]


def random_state(seed, merge=False, n_docs=12):
    rng = np.random.default_rng(seed)
    tree = build_tree(SYN, V, beta_root=0.05, beta_synset=2.0, merge=merge)
    lens = rng.integers(3, 15, size=n_docs)
    doc_ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    term_ids = rng.integers(0, V, doc_ptr[-1]).astype(np.int32)
    term_ids.flags.writeable = False  # as a corpus's: the trainers' compiled kernels
    # a few topics per document, so that lists are really sparse
    z = np.concatenate([rng.choice(rng.choice(K, 2, replace=False), n) for n in lens]).astype(np.int32)
    zp = np.array([rng.integers(tree.word_path_ptr[w], tree.word_path_ptr[w + 1])
                   for w in term_ids], dtype=np.int32)
    alpha = rng.uniform(0.05, 0.5, K)
    n_e, n_i, n_dk = ref.counts(tree, doc_ptr, term_ids, z, zp, K)
    n_e, n_i, n_dk = (a.astype(np.int32) for a in (n_e, n_i, n_dk))
    return tree, doc_ptr, term_ids, z, zp, alpha, n_e, n_i, n_dk


def inv_of(tree, n_i):
    with np.errstate(divide="ignore"):
        return 1.0 / (tree.beta_sum[:, None] + n_i)


def args(tree):
    return (tree.word_path_ptr, tree.path_edges, tree.path_len, tree.parent)


def arrays(tree):
    """The tree as the kernels take it, with its own root row."""
    return TreeArrays(*args(tree), TS.root_of(tree.parent), tree.beta, tree.beta_sum)


def chain_of(n_e, n_i, n_dk, inv, alpha):
    """The chain as the kernels take it, for kernels that read no assignment: those and the
    arrays given as None are empty ones of their types."""
    counts = np.zeros((0, len(alpha)), np.int32)
    return Chain(np.zeros(0, np.int32), np.zeros(0, np.int64), n_e,
                 counts if n_i is None else n_i, counts if n_dk is None else n_dk,
                 np.zeros((0, len(alpha))) if inv is None else inv, alpha)


class Sparse:
    """The sampler's tables, lists and caches for doc d, built by the kernels' own builders (the
    document's list unsorted whatever SD: the kernel sorts it only when a draw lands in r)."""

    def __init__(self, tree, n_e, n_dk, inv, alpha, d, sw, bound=None):
        self.root = TS.root_of(tree.parent)
        self.tree = arrays(tree)
        bound = T.path_bound(tree, alpha) if bound is None else bound
        self.work = T.sweep_work(*args(tree), tree.beta, tree.beta_sum, tree.path_prior(), bound, K)
        self.wint, self.pint, self.pairs = self.work
        self.wtab, self.ptab = self.wint.view(np.float64), self.pint.view(np.float64)
        self.etop, self.ecnt = self.pairs[:, 1:, 0], self.pairs[:, 1:, 1]
        self.enz, self.touched = self.pairs[:, 0, 0], self.pairs[:, 0, 1]
        self.tables = TT.Tables(self.wint, self.wtab, self.pint, self.ptab, self.etop, self.ecnt,
                                self.enz, self.touched)
        TT.begin_lists(self.tables, self.tree, n_e, sw)
        self.dl = np.empty((3, K), np.int32)  # the document list: topics, counts, positions
        self.dtop, self.dcnt, self.dpos = self.dl[0:1], self.dl[1:2], self.dl[2:3]
        self.dnz = TL.topic_list(n_dk, d, False, self.dtop, self.dcnt, self.dpos, 0)
        self.coef, self.acc = np.empty(K), np.zeros(2)
        self.doc = TT.DocCache(self.dl, self.coef, self.acc)
        TS.doc_sums(d, self.tree, chain_of(n_e, None, n_dk, inv, alpha), self.doc, self.dnz)
        P = np.diff(tree.word_path_ptr).max()
        self.inv0, self.tot = np.zeros((2, K)), np.zeros((3, P))
        self.stp, self.rtp, self.qtp = self.tot
        self.qe, self.qv = np.zeros((2, P), np.int64), np.zeros(P * K)
        self.scratch = TT.Scratch(self.inv0, self.tot, self.qv, self.qe)

    def buckets(self, tree, w, exact, n_e, inv, alpha):
        return TS.buckets(w, exact, self.tables, self.tree, chain_of(n_e, None, None, inv, alpha),
                          self.doc, self.dnz, self.scratch)

    def draw(self, tree, rb, sd, sw, w, n_e, inv, alpha, rng):
        return TS.draw(rb, sd, sw, w, self.tables, self.tree, chain_of(n_e, None, None, inv, alpha),
                       self.doc, self.dnz, self.scratch, rng)


@pytest.mark.parametrize("seed", range(4))
def test_buckets_equal_eq5_and_naive_to_1e12(seed):
    tree, doc_ptr, term_ids, z, zp, alpha, n_e, n_i, n_dk = random_state(seed)
    inv = inv_of(tree, n_i)
    bound = T.path_bound(tree, alpha)
    for d in range(len(doc_ptr) - 1):
        sp = Sparse(tree, n_e, n_dk, inv, alpha, d, sw=bool(seed % 2), bound=bound)
        stp, rtp, etop, qe, qv = sp.stp, sp.rtp, sp.etop, sp.qe[0], sp.qv
        for w in range(V):
            want = ref.conditional(tree, w, d, n_e, n_i, n_dk, alpha)
            s, r, q = ref.buckets(tree, w, d, n_e, n_i, n_dk, alpha)
            P = want.shape[1]
            st, rt, qt = sp.buckets(tree, w, True, n_e, inv, alpha)
            np.testing.assert_allclose(stp[:P], s.sum(0), rtol=1e-12, atol=0)
            np.testing.assert_allclose(rtp[:P], r.sum(0), rtol=1e-12, atol=1e-300)
            dense_q = np.zeros((K, P))
            for c in range(P):
                a0 = 0 if c == 0 else qe[c - 1]
                j0 = tree.path_edges[tree.word_path_ptr[w] + c, 0]
                for a in range(a0, qe[c]):
                    dense_q[etop[j0, a - a0], c] += qv[a]
            np.testing.assert_allclose(dense_q, q, rtol=1e-12, atol=1e-300)
            # q's cells are exactly the nonzero ones (the edge-masked count is positive)
            assert qe[P - 1] == (q > 0).sum()
            fast = s + r + dense_q
            np.testing.assert_allclose(fast / fast.sum(), want, rtol=1e-12, atol=0)
            assert st + rt + qt == pytest.approx(fast.sum(), rel=1e-12)
            naive = np.zeros((K, P))
            T.naive_masses(w, d, arrays(tree), chain_of(n_e, n_i, n_dk, None, alpha), naive)
            np.testing.assert_allclose(naive / naive.sum(), want, rtol=1e-12, atol=0)
            # the refined bucket's bounds hold: per path, and eq. 6's s'_w
            sp.buckets(tree, w, False, n_e, inv, alpha)
            assert (s.sum(0) <= stp[:P] * (1 + 1e-12)).all()
            assert (r.sum(0) <= rtp[:P] * (1 + 1e-12)).all()
            assert s.sum() <= bound[w] * (1 + 1e-12)


@pytest.mark.parametrize("variant", range(6))
@pytest.mark.parametrize("w,d", [(1, 3), (2, 5), (8, 0)])
def test_every_sampler_draws_from_the_conditional(variant, w, d):
    tree, doc_ptr, term_ids, z, zp, alpha, n_e, n_i, n_dk = random_state(7)
    inv = inv_of(tree, n_i)
    want = ref.conditional(tree, w, d, n_e, n_i, n_dk, alpha)
    P = want.shape[1]
    rng = make_rng_states(variant + 1)
    n = 40000
    hits = np.zeros((K, P))
    bound = T.path_bound(tree, alpha)
    ptr = tree.word_path_ptr
    if variant == T.NAIVE:
        m = np.zeros((K, P))
        T.naive_masses(w, d, arrays(tree), chain_of(n_e, n_i, n_dk, None, alpha), m)
        u = np.array([T.uniform(rng) for _ in range(n)]) * m.sum()
        for x in u:
            hits.flat[T._pick(m, x)] += 1
    else:
        rb, sd, sw = variant >= T.FAST_RB, variant in (3, 5), variant in (4, 5)
        sp = Sparse(tree, n_e, n_dk, inv, alpha, d, sw, bound=bound)
        start = sp.dl[:, :sp.dnz].copy()
        for _ in range(n):
            k, p, i = sp.draw(tree, rb, sd, sw, w, n_e, inv, alpha, rng)
            hits[k, p - ptr[w]] += 1
            # a draw in q names k's place in the root edge's list; other draws say -2
            j = tree.path_edges[p, 0]
            assert i == -2 or sp.etop[j, i] == k
        # some draws landed in r: SD sorted the document's list there, the others leave it be
        cnt = sp.dcnt[0, :sp.dnz]
        assert (np.diff(cnt) <= 0).all() if sd else (sp.dl[:, :sp.dnz] == start).all()
        assert (sp.dpos[0, sp.dtop[0, :sp.dnz]] == np.arange(sp.dnz)).all()
    # every cell within 5 binomial standard deviations
    p = want.ravel()
    assert (np.abs(hits.ravel() / n - p) <= 5 * np.sqrt(p * (1 - p) / n) + 1e-9).all()


@pytest.mark.parametrize("variant", range(T.FAST_RB, T.FAST_RB_SDW + 1))
@pytest.mark.parametrize("w,d", [(1, 3), (2, 5)])
def test_refined_draws_stay_exact_whatever_the_slack_of_their_bounds(variant, w, d):
    """The refined bucket bounds s and r of the synset paths and computes them only when a draw
    lands in a bound, redrawing from the exact totals when it lands in the slack. Bounds eight
    times too loose put about a fifth of the mass in the slack; the draws must not move."""
    tree, _, _, _, _, alpha, n_e, n_i, n_dk = random_state(7)
    inv = inv_of(tree, n_i)
    want = ref.conditional(tree, w, d, n_e, n_i, n_dk, alpha)
    P = want.shape[1]
    sd, sw = variant in (3, 5), variant in (4, 5)
    bound = 8.0 * T.path_bound(tree, alpha)
    sp = Sparse(tree, n_e, n_dk, inv, alpha, d, sw, bound=bound)
    sp.ptab[:, TT.P_DOWN] *= 8.0
    st, rt, qt = sp.buckets(tree, w, True, n_e, inv, alpha)
    sb, rb, _ = sp.buckets(tree, w, False, n_e, inv, alpha)
    assert (min(sb, bound[w]) + rb - st - rt) / (st + rt + qt) > 0.15
    rng = make_rng_states(variant + 11)
    n = 40000
    hits = np.zeros((K, P))
    ptr = tree.word_path_ptr
    for _ in range(n):
        k, p, _ = sp.draw(tree, True, sd, sw, w, n_e, inv, alpha, rng)
        hits[k, p - ptr[w]] += 1
    p = want.ravel()
    assert (np.abs(hits.ravel() / n - p) <= 5 * np.sqrt(p * (1 - p) / n) + 1e-9).all()


def test_sort_doc_list_orders_by_decreasing_count_stably_with_positions():
    rng = np.random.default_rng(0)
    for _ in range(50):
        nz = int(rng.integers(0, K + 1))
        dl = np.full((3, K), -1, np.int32)
        dl[0, :nz] = rng.permutation(K)[:nz]
        dl[1, :nz] = rng.integers(1, 4, nz)
        dl[2, dl[0, :nz]] = np.arange(nz)
        want = sorted(zip(-dl[1, :nz], range(nz), dl[0, :nz]))  # stable: ties keep list order
        TL.sort_doc_list(dl, nz)
        assert dl[0, :nz].tolist() == [k for _, _, k in want]
        assert dl[1, :nz].tolist() == [-c for c, _, _ in want]
        assert (dl[2, dl[0, :nz]] == np.arange(nz)).all()


@pytest.mark.parametrize("track", [True, False])
@pytest.mark.parametrize("sort", [False, True])
def test_topic_lists_stay_the_nonzero_topics_with_their_counts(sort, track):
    rng = np.random.default_rng(5)
    Kl = 12
    cnt = np.zeros((2, Kl), np.int32)
    cnt[1] = rng.integers(0, 4, Kl)
    top, lc = np.empty((3, Kl), np.int32), np.empty((3, Kl), np.int32)
    pos = np.full((3, Kl), 7, np.int32)
    nz = TL.topic_list(cnt, 1, sort, top, lc, pos, 2, track)
    for _ in range(3000):
        k = rng.integers(Kl)
        i = int(pos[2, k]) if track else TL.find(top, 2, nz, k)
        assert i == (list(top[2, :nz]).index(k) if cnt[1, k] else -1)
        if cnt[1, k] > 0 and rng.random() < 0.5:
            cnt[1, k] -= 1
            nz = TL.list_dec(top, lc, pos, 2, nz, k, i, sort, track)
        else:
            cnt[1, k] += 1
            nz = TL.list_inc(top, lc, pos, 2, nz, k, i, sort, track)
        lst = top[2, :nz]
        assert sorted(lst) == list(np.flatnonzero(cnt[1]))
        assert (lc[2, :nz] == cnt[1, lst]).all()
        # the position index: k's place in the list, -1 for every topic not in it (or untouched)
        want = np.full(Kl, -1)
        want[lst] = np.arange(nz)
        np.testing.assert_array_equal(pos[2], want if track else 7)
        if sort:
            assert (np.diff(lc[2, :nz]) <= 0).all()


def sweep_variants(first=T.NAIVE):
    """Samplers whose whole sweep a test runs. Each compiles its own kernel (some 20 s in a fresh
    checkout), so the default suite sweeps with NAIVE, FAST-RB (which the list trace compiles
    anyway) and the default FAST-RB-SDW; FAST's sweeps run in make test-long, FAST-RB-SD's and
    FAST-RB-SW's with --runslow. Every sampler's draws are checked against the conditional in
    the default suite (test_every_sampler_draws_from_the_conditional)."""
    marks = {T.FAST: [pytest.mark.long], T.FAST_RB_SD: [pytest.mark.slow], T.FAST_RB_SW: [pytest.mark.slow]}
    return [pytest.param(v, marks=marks.get(v, [])) for v in range(first, T.FAST_RB_SDW + 1)]


@pytest.mark.parametrize("variant", sweep_variants())
def test_sweep_keeps_counts_and_same_seed_same_state(variant):
    tree, doc_ptr, term_ids, z, zp, alpha, n_e, n_i, n_dk = random_state(3, merge=True)
    inv = inv_of(tree, n_i)
    bound = T.path_bound(tree, alpha)
    runs = []
    for _ in range(2):
        st = [a.copy() for a in (z, zp, n_e, n_i, n_dk, inv)]
        rng = make_rng_states(11)
        for _ in range(3):
            T.sweep(variant, doc_ptr, term_ids, st[0], st[1], *args(tree), tree.beta,
                    tree.beta_sum, tree.path_prior(), bound, st[2], st[3], st[4], st[5], alpha, rng)
        runs.append(st)
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    z2, zp2, n_e2, n_i2, n_dk2, inv2 = runs[0]
    assert (z2 != z).any()
    assert all(tree.path_word[p] == w for p, w in zip(zp2, term_ids))
    for got, want in zip((n_e2, n_i2, n_dk2), ref.counts(tree, doc_ptr, term_ids, z2, zp2, K)):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(inv2[n_i2.sum(1) > 0], inv_of(tree, n_i2)[n_i2.sum(1) > 0], rtol=1e-15)


@pytest.mark.parametrize("variant", sweep_variants(T.FAST))
def test_a_sweep_cut_at_document_boundaries_draws_what_one_call_draws(variant):
    """Threads may sweep a chain in two pieces (models/tree_lda/shards.py): the pieces share the
    chain's lists, so the cut changes no draw, count or reciprocal."""
    tree, doc_ptr, term_ids, z, zp, alpha, n_e, n_i, n_dk = random_state(3, merge=True)
    bound = T.path_bound(tree, alpha)
    D = len(doc_ptr) - 1
    root = TS.root_of(tree.parent)
    out = []
    for cuts in ([], [1], [D // 2], [D - 1], [2, 5, 9]):
        st = [a.copy() for a in (z, zp, n_e, n_i, n_dk, inv_of(tree, n_i))]
        rng = make_rng_states(11)
        work = T.sweep_work(*args(tree), tree.beta, tree.beta_sum, tree.path_prior(), bound, K)
        edges = [0] + cuts + [D]
        for _ in range(3):
            for a in range(len(edges) - 1):
                lo, hi = edges[a], edges[a + 1]
                T.sweep_runs(variant, doc_ptr[lo:hi + 1], np.arange(lo, hi), root, term_ids, st[0],
                             st[1], *args(tree), tree.beta, tree.beta_sum, tree.path_prior(), bound,
                             *st[2:], alpha, rng, work=work, begin=a == 0, end=a == len(edges) - 2)
        out.append(st)
    assert (out[0][0] != z).any()
    for st in out[1:]:
        for got, want in zip(st, out[0]):
            np.testing.assert_array_equal(got, want)
    for got, want in zip(out[0][2:5], ref.counts(tree, doc_ptr, term_ids, out[0][0], out[0][1], K)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("rb,sd,sw", [(False, False, False), (True, True, True), (True, False, True)])
def test_resample_keeps_lists_and_caches_equal_to_fresh_ones(rb, sd, sw):
    tree, doc_ptr, term_ids, z, zp, alpha, n_e, n_i, n_dk = random_state(9, n_docs=3)
    inv = inv_of(tree, n_i)
    rng = make_rng_states(4)
    bound = T.path_bound(tree, alpha)
    z0 = z.copy()
    chain = Chain(z, zp, n_e, n_i, n_dk, inv, alpha)
    for d in range(len(doc_ptr) - 1):
        sp = Sparse(tree, n_e, n_dk, inv, alpha, d, sw, bound=bound)
        dnz = sp.dnz
        for t in list(range(doc_ptr[d], doc_ptr[d + 1])) * 3:
            runs = Runs(np.array([t, t + 1]), np.array([d]), term_ids)
            dnz = TS.resample(0, runs, rb, sd, sw, sp.tables, sp.tree, chain, sp.doc, dnz,
                              sp.scratch, rng)
            # the root edges' counts (and their nodes') changed in their lists only: n_e's, n_i's
            # and inv's rows come from them
            assert sp.touched[tree.path_edges[zp[t], 0]]
            TT.end_lists(sp.tables, sp.tree, chain)
            live = tree.beta_sum > 0
            np.testing.assert_array_equal(inv[live], inv_of(tree, n_i)[live])
            fresh = Sparse(tree, n_e, n_dk, inv, alpha, d, sw, bound=bound)
            assert dnz == fresh.dnz and sorted(sp.dtop[0, :dnz]) == sorted(fresh.dtop[0, :dnz])
            assert (sp.dcnt[0, :dnz] == n_dk[d, sp.dtop[0, :dnz]]).all()
            np.testing.assert_allclose(sp.coef, fresh.coef, rtol=1e-14)
            np.testing.assert_allclose(sp.acc, fresh.acc, rtol=1e-12, atol=1e-300)
            for j in np.flatnonzero(tree.parent == sp.root):
                got, want = sp.etop[j, :sp.enz[j]], fresh.etop[j, :fresh.enz[j]]
                assert sorted(got) == sorted(want)
                assert (sp.ecnt[j, :sp.enz[j]] == n_e[j, got]).all()
                if sw:
                    assert (np.diff(n_e[j, got]) <= 0).all()
            want = np.full(K, -1)
            want[sp.dtop[0, :dnz]] = np.arange(dnz)
            np.testing.assert_array_equal(sp.dpos[0], want)
    assert (z != z0).any()
    for got, want in zip((n_e, n_i, n_dk), ref.counts(tree, doc_ptr, term_ids, z, zp, K)):
        np.testing.assert_array_equal(got, want)


def test_bench_list_trace_counts_list_lengths_and_bucket_shares():
    from models.common.corpus import make_corpus
    from retrieval.bench.tree_lda import list_trace
    tree, doc_ptr, term_ids, *_ = random_state(2)
    corpus = make_corpus(doc_ptr, term_ids, n_terms=V)
    rows, shares = list_trace(corpus, tree, K, 3, every=1)
    assert [r[0] for r in rows] == [1, 2, 3]
    assert all(1 <= x <= K for r in rows for x in r[2:])
    # the mean over all tokens is the token-weighted mean of the one-path and several-path means
    one = (np.diff(tree.word_path_ptr)[term_ids] == 1).mean()
    assert 0 < one < 1
    assert all(r[2] == pytest.approx(one * r[3] + (1 - one) * r[4]) for r in rows)
    assert sum(shares) == pytest.approx(1.0) and min(shares) > 0
    # one topic: every list holds exactly it
    rows, shares = list_trace(corpus, tree, 1, 2, every=1)
    assert all(x == 1 for r in rows for x in r[2:])


def test_bench_paper_ratios_divide_the_papers_naive_time():
    from retrieval.bench.tree_lda import paper_ratios
    r = paper_ratios("T", [100, 500, 7], ["naive", "fast-rb-sdw"])
    assert r[0, :2].tolist() == [1.0, 1.0]
    assert r[1, 0] == pytest.approx(12.655 / 3.241) and r[1, 1] == pytest.approx(71.223 / 7.424)
    assert np.isnan(r[:, 2]).all()  # no such column in the paper
    assert paper_ratios("C", [500], ["fast"])[0, 0] == pytest.approx(15.377 / 8.079)


@njit
def _through_borrowed(a):
    """Doubles every entry of ``a`` through a borrowed view; returns the view's shape, strides
    and sum as read through it."""
    b = borrowed(a)
    for i in range(b.shape[0]):
        for j in range(b.shape[1]):
            b[i, j] *= 2
    return b.shape, b.strides, b.sum()


@pytest.mark.skipif(config.DISABLE_JIT, reason="borrowed is an intrinsic: jitted code only")
def test_borrowed_view_is_the_same_memory():
    """The sparse sweep runs on borrowed views of its arrays: they must read and write the
    arrays themselves, strided views included."""
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    for a in (base.copy(), base.copy()[:, ::2], base.copy().T):
        before = a.copy()
        shape, strides, total = _through_borrowed(a)
        assert shape == a.shape and strides == a.strides
        np.testing.assert_array_equal(a, 2 * before)
        assert total == 2 * before.sum()
