"""Tree-LDA's fixed shards (models/tree_lda/shards.py): word groups own whole synset components, a
sub-step's shards touch disjoint counts, and a sharded fit keeps exact counts, one model per seed
whatever the threads, and bit-identical resume."""
import numpy as np
import pytest

from models import corpus_from_docs
from models.tree_lda.tree import build_tree
from models.tree_lda.model import TreeLDA
from models.tree_lda.shards import _run_plan, tree_shards, word_groups, wrap_plan
from tests.helpers import resume_after_kill
from tests.reference import tree_lda_reference as ref

V = 16
SYN = [[0, 1, 2], [1, 3], [4, 5], [2, 6, 7], [9, 10], [12, 13, 14]]
FAST = dict(n_topics=3, n_chains=2, n_iter=6, burn_in=2, sample_every=2, seed=5, log_lik_every=2)


def corpus(n_docs=40, seed=0):
    rng = np.random.default_rng(seed)
    docs = [rng.integers(0, V, size=rng.integers(5, 25)) for _ in range(n_docs)]
    return corpus_from_docs(docs, n_terms=V, fingerprint="synthetic")


def test_groups_own_whole_synset_components_and_balance_tokens():
    tree = build_tree(SYN, V)
    counts = np.arange(1, V + 1) * 10
    g = word_groups(tree, counts, 3)
    for comp in ([0, 1, 2, 3, 6, 7], [4, 5], [9, 10], [12, 13, 14]):
        assert len(set(g[comp].tolist())) == 1, comp
    load = np.bincount(g, weights=counts, minlength=3)
    biggest = counts[[0, 1, 2, 3, 6, 7]].sum()
    assert load.max() - load.min() <= biggest
    assert set(g.tolist()) == {0, 1, 2}


@pytest.mark.parametrize("S", [2, 3])
def test_a_sub_steps_shards_touch_disjoint_counts(S):
    c = corpus()
    tree = build_tree(SYN, V)
    sh = tree_shards(c, tree, S)
    M, root = tree.n_nodes, sh.root
    assert sorted(sh.order.tolist()) == list(range(c.n_tokens))
    np.testing.assert_array_equal(sh.term_ids, c.term_ids[sh.order])
    doc_of = np.repeat(np.arange(c.n_docs), np.diff(c.doc_ptr))[sh.order]
    for j in range(S):
        nodes = []
        for s in range(S):
            g = (s + j) % S
            lo, hi = sh.block_ptr[s, g], sh.block_ptr[s, g + 1]
            toks = np.arange(sh.run_ptr[lo], sh.run_ptr[hi])
            assert (sh.word_group[sh.term_ids[toks]] == g).all()
            assert (np.repeat(sh.run_doc[lo:hi], np.diff(sh.run_ptr[lo:hi + 1])) == doc_of[toks]).all()
            mine = set()
            for w in np.unique(sh.term_ids[toks]):
                for p in range(tree.word_path_ptr[w], tree.word_path_ptr[w + 1]):
                    for e in tree.path_edges[p, :tree.path_len[p]]:
                        par = sh.parents[s, g][e]
                        assert par == (M + s if tree.parent[e] == root else tree.parent[e])
                        mine |= {("edge", int(e)), ("node", int(par))}
            nodes.append(mine)
        for a in range(S):
            for b in range(a + 1, S):
                assert not nodes[a] & nodes[b]
    # every token in exactly one block, blocks of shard s hold shard s's documents only
    assert sh.run_ptr[-1] == c.n_tokens and sh.block_ptr[-1, -1] == len(sh.run_doc)


# FAST's sweep is a compiled kernel of its own that no other test of the default suite needs: its
# sharded fit runs in make test-long, beside its whole sweeps (tests/test_tree_lda_kernels.py).
@pytest.mark.parametrize("sampler", ["naive", "fast-rb-sdw", pytest.param("fast", marks=pytest.mark.long)])
def test_sharded_fit_keeps_exact_counts(sampler):
    c = corpus(seed=1)
    m = TreeLDA(**dict(FAST, n_shards=3, sampler=sampler)).fit(c, synsets=SYN)
    tree = m.tree_
    for ch in range(m.n_chains):
        z, zp = m.z_[ch], m.zp_[ch]
        assert (tree.path_word[zp] == c.term_ids).all()
        n_e, n_i, n_dk = ref.counts(tree, c.doc_ptr, c.term_ids, z, zp, m.n_topics)
        np.testing.assert_array_equal(m.n_e_[ch], n_e)
        np.testing.assert_array_equal(m.n_i_[ch], n_i)
        np.testing.assert_array_equal(m.n_dk_[ch], n_dk)
        live = tree.beta_sum > 0
        np.testing.assert_array_equal(m.inv_[ch][live], 1.0 / (tree.beta_sum[live, None] + n_i[live]))


def test_sharded_model_depends_on_shards_not_threads():
    c = corpus(seed=4)
    one = TreeLDA(**dict(FAST, n_shards=2, n_jobs=1)).fit(c, synsets=SYN)
    two = TreeLDA(**dict(FAST, n_shards=2, n_jobs=2)).fit(c, synsets=SYN)
    np.testing.assert_array_equal(one.zzp_, two.zzp_)
    np.testing.assert_array_equal(one.p_w_d(np.arange(V)), two.p_w_d(np.arange(V)))
    seq = TreeLDA(**dict(FAST, n_shards=1, n_jobs=2)).fit(c, synsets=SYN)
    assert (seq.zzp_ != one.zzp_).any()


@pytest.mark.parametrize("costs,n", [([10, 10, 10], 2), ([10, 10, 10], 3), ([5, 10, 3, 7, 9, 1], 3),
                                     ([4, 0, 9, 9, 2], 2), ([7], 2), ([3, 30, 2], 2), ([1, 2, 3, 4], 8)])
def test_wrap_plan_spreads_tasks_evenly_and_runs_a_cut_tasks_parts_in_order(costs, n):
    plan = wrap_plan(costs, n)
    assert 1 <= len(plan) <= min(n, len(costs))
    L = max(sum(costs) / len(plan), max(costs))
    seen = {}
    for t, thread in enumerate(plan):
        load = sum(costs[i] * (1.0 if part == 0 else share if part == 1 else 1 - share)
                   for i, share, part in thread)
        assert load <= L + 1e-9
        for pos, (i, share, part) in enumerate(thread):
            seen.setdefault(i, []).append((part, t, pos, share))
            if part == 1:  # a first part opens its thread, a second part closes one
                assert pos == 0 and 0 < share < 1
            if part == 2:
                assert pos == len(thread) - 1
    assert sorted(seen) == list(range(len(costs)))
    for i, parts in seen.items():
        if len(parts) == 1:
            assert parts[0][0] == 0
        else:  # part 1 starts the next thread while part 2 ends this one, after part 1 has run
            (p1, t1, _, s1), (p2, t2, _, s2) = sorted(parts)
            assert (p1, p2) == (1, 2) and t1 == t2 + 1 and s1 == s2
            done_first = costs[i] * s1
            start_second = sum(costs[j] * (1.0 if part == 0 else share if part == 1 else 1 - share)
                               for j, share, part in plan[t2][:-1])
            assert done_first <= start_second + 1e-9


def test_a_failed_first_part_stops_its_second_part_and_raises():
    from concurrent.futures import ThreadPoolExecutor
    plan = wrap_plan([10, 10, 10], 2)  # task 1 is cut: part 1 opens thread 1, part 2 ends thread 0
    ran = []

    def piece(task, share, part):
        ran.append((task, part))
        if (task, part) == (1, 1):
            raise RuntimeError("boom")

    with ThreadPoolExecutor(2) as pool, pytest.raises(RuntimeError, match="boom"):
        _run_plan(plan, piece, pool)
    assert (1, 2) not in ran and (0, 0) in ran


@pytest.mark.parametrize("S", [1, 2])
def test_model_is_the_same_whatever_the_threads_when_chains_are_cut_between_threads(S):
    """Three chains on two threads: one chain's sweep (S = 1), or some shards' blocks (S = 2),
    run in two pieces on two threads; the model must not change."""
    c = corpus(seed=7)
    kw = dict(FAST, n_chains=3, n_shards=S)
    one = TreeLDA(**kw, n_jobs=1).fit(c, synsets=SYN)
    two = TreeLDA(**kw, n_jobs=2).fit(c, synsets=SYN)
    np.testing.assert_array_equal(one.zzp_, two.zzp_)
    for a, b in ((one.n_e_, two.n_e_), (one.n_i_, two.n_i_), (one.inv_, two.inv_)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(one.p_w_d(np.arange(V)), two.p_w_d(np.arange(V)))


def test_sharded_resume_is_bit_identical(tmp_path):
    c = corpus(seed=6)
    kw = dict(FAST, n_iter=8, checkpoint_every=2, n_shards=2)
    full = TreeLDA(**kw).fit(c, synsets=SYN)
    resumed = resume_after_kill(TreeLDA, kw, c, tmp_path / "t.ckpt", kill_at=5, synsets=SYN)
    np.testing.assert_array_equal(resumed.zzp_, full.zzp_)
    np.testing.assert_array_equal(resumed.log_lik_, full.log_lik_)


def test_sharded_chain_mixes_like_the_sequential_one():
    """The stale root counts of a sub-step cost little: after 30 sweeps on three planted topics
    the sharded chains reach the sequential chains' log-likelihood within 1%."""
    rng = np.random.default_rng(3)
    blocks = [np.arange(0, 5), np.arange(5, 10), np.arange(10, 16)]
    docs = [rng.choice(blocks[d % 3], size=30) for d in range(90)]
    c = corpus_from_docs(docs, n_terms=V, fingerprint="planted")
    kw = dict(n_topics=3, n_chains=2, n_iter=30, burn_in=20, sample_every=5, seed=2, log_lik_every=30)
    seq = TreeLDA(**kw).fit(c, synsets=SYN).log_lik_[-1].mean()
    shard = TreeLDA(**kw, n_shards=3).fit(c, synsets=SYN).log_lik_[-1].mean()
    assert shard == pytest.approx(seq, rel=0.01)
