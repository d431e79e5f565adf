"""TCM restaurants: a shard's own slot tables beside the shared global ones, and slot tables
whose size changes no draw."""
import numpy as np
import pytest

from models.common.corpus import synthetic_corpus
from models.tcm.build_kernels import build_tables, build_tables_coded, init_random
from models.tcm.model import TCM
from models.tcm.restaurants import (entries_copy, entries_reserve, entry_add, entry_lookup,
                                    entry_rehash, entry_slots, hash_span, type_lookup, type_new,
                                    type_rehash, type_slots, types_copy, types_reserve)
from tests.test_tcm import prepared


def random_tables(n_docs=60, seed=4, max_len=4, n_topics=6):
    corpus = synthetic_corpus(n_docs, 40, 30, seed=seed, n_latent=3)
    split = np.zeros(corpus.n_tokens, dtype=np.uint8)
    b = np.empty(corpus.n_tokens, dtype=np.int32)
    shard_doc = np.array([0, corpus.n_docs], dtype=np.int64)
    init_random(shard_doc, corpus.doc_ptr, split, b, n_topics, 0.5, max_len,
                np.random.default_rng(seed).integers(1, 2**63, size=(1, 4), dtype=np.uint64))
    return corpus, build_tables(corpus.term_ids, b, n_topics)


def test_global_slot_tables_are_kept_at_load_factor_one_third():
    for n_docs in (60, 400):
        _, t = random_tables(n_docs)
        assert t.n_types > 64 and t.n_entries > 64
        assert len(t.ty_slot) == 6 * t.n_types and len(t.en_slot) == 6 * t.n_entries


def test_a_shard_finds_global_and_added_types_and_entries_while_its_tables_grow():
    """Every span of 1..5 tokens becomes a type (those the global tables lack are added, a few
    at a time with reserves between, as the sweep reserves per document) and gets entries; then
    every one is found under its id, and every type's list holds its entries in topic order."""
    corpus, t = random_tables()
    term_ids = corpus.term_ids
    n0, m0 = t.n_types, t.n_entries
    room = 10 * len(term_ids)
    ty = list(types_copy(t.ty_hash, t.ty_len, t.ty_pos, t.ty_head, n0, room, 8))
    en = list(entries_copy(t.en_type, t.en_topic, t.en_count, t.en_next, m0, room, 8))
    slots0 = (len(ty[0]), len(en[0]))
    n_types, n_entries = n0, m0
    want_type, want_count = {}, {}
    for e in range(m0):
        want_count[(int(t.en_type[e]), int(t.en_topic[e]))] = int(t.en_count[e])
    rng = np.random.default_rng(0)
    for a in range(0, len(term_ids) - 5):
        ty[0] = types_reserve(ty[0], ty[1], ty[2], n0, n_types, 5)
        en[0] = entries_reserve(en[0], en[1], en[2], m0, n_entries, 5)
        for n in range(1, 6):
            h = np.uint64(hash_span(term_ids, a, n))
            got = type_lookup(t.ty_slot, ty[0], ty[3], term_ids, h, a, n)
            key = tuple(term_ids[a:a + n])
            if got < 0:
                assert key not in want_type
                type_new(*ty, got, h, n, a, n_types)
                got = n_types
                n_types += 1
            want_type.setdefault(key, got)
            assert got == want_type[key]
            k = int(rng.integers(6))
            e = entry_add(t.en_slot, *en, n_entries, ty[4], got, k, 1)
            n_entries = max(n_entries, e + 1)
            want_count[(got, k)] = want_count.get((got, k), 0) + 1
    assert n_types > 4 * n0 and len(ty[0]) > 8 * slots0[0] and len(en[0]) > 8 * slots0[1]
    for key, tid in want_type.items():
        a = int(ty[3][tid])
        assert tuple(term_ids[a:a + len(key)]) == key
        assert type_lookup(t.ty_slot, ty[0], ty[3], term_ids,
                           np.uint64(hash_span(term_ids, a, len(key))), a, len(key)) == tid
    got_count = {}
    for tid in range(n_types):
        e, prev = ty[4][tid], -1
        while e >= 0:
            assert en[2][e] > prev
            prev = en[2][e]
            got_count[(tid, int(en[2][e]))] = int(en[3][e])
            assert entry_lookup(t.en_slot, en[0], tid, int(en[2][e])) == e
            e = en[4][e]
    assert got_count == want_count
    assert entry_lookup(t.en_slot, en[0], n_types - 1, 7) < 0


def loose(tables, factor):
    """The same restaurants with slot tables ``factor`` times larger."""
    ty_slot = type_slots(factor * tables.n_types)
    type_rehash(ty_slot, tables.ty_hash, tables.ty_len, 0, tables.n_types)
    en_slot = entry_slots(factor * tables.n_entries)
    entry_rehash(en_slot, tables.en_type, tables.en_topic, 0, tables.n_entries)
    return tables._replace(ty_slot=ty_slot, en_slot=en_slot)


@pytest.mark.parametrize("sampler", ["sparse", "exact"])
def test_sweeps_are_the_same_whatever_the_size_of_the_slot_tables(sampler):
    corpus = synthetic_corpus(150, 60, 40, seed=6, n_latent=4)
    split = (np.random.default_rng(2).random(corpus.n_tokens) < 0.2).astype(np.uint8)
    runs = []
    for factor in (0, 8):
        m = prepared(TCM(n_topics=7, n_chains=1, n_shards=3, seed=4, sampler=sampler), corpus,
                     split, alpha0=20.0)
        m._init_chains(corpus)  # the random start: the first sweeps add many types
        for _ in range(3):
            if factor:
                m._tables[0] = loose(m._chain_tables(0), factor)
            m._sweep(0)
        runs.append((m.b_[0].copy(), m.dt_topic_[0].copy(), m.dt_count_[0].copy(),
                     m.rng_[0].copy()))
    assert (runs[0][0] < 0).any()
    for got, want in zip(runs[1], runs[0]):
        np.testing.assert_array_equal(got, want)


def assert_same_restaurants(got, want):
    """Equal restaurants, field for field (the type and entry arrays up to their counts, since
    their capacity beyond is scratch)."""
    assert got.n_types == want.n_types and got.n_entries == want.n_entries
    for name in got._fields:
        g, w = getattr(got, name), getattr(want, name)
        if name.startswith("ty_") and name != "ty_slot":
            g, w = g[:want.n_types], w[:want.n_types]
        elif name.startswith("en_") and name != "en_slot":
            g, w = g[:want.n_entries], w[:want.n_entries]
        np.testing.assert_array_equal(g, w, err_msg=name)


@pytest.mark.parametrize("sampler,shards", [("sparse", 3), ("exact", 1), ("sparse", 1)])
def test_the_merge_from_the_sweeps_types_is_the_rebuild_from_b(sampler, shards):
    """After every sweep, from the random start on (most types added by the sweep) to settled
    chains (most types kept), the restaurants built from the types the sweep wrote are those
    built from b alone."""
    corpus = synthetic_corpus(150, 60, 40, seed=6, n_latent=4)
    split = (np.random.default_rng(2).random(corpus.n_tokens) < 0.2).astype(np.uint8)
    m = prepared(TCM(n_topics=7, n_chains=1, n_shards=shards, seed=4, sampler=sampler), corpus,
                 split, alpha0=20.0)
    m._init_chains(corpus)
    added = []
    for _ in range(6):
        t = m._chain_tables(0)
        code, old_hash = t.col_entry, t.ty_hash[:t.n_types].copy()
        m._sweep(0, merge=False, code=code)
        boundary = m.b_[0] >= 0
        added.append(int((code[boundary] >= t.n_types).sum()))  # types the sweep added
        assert (code[boundary] >= 0).all()
        want = build_tables(corpus.term_ids, m.b_[0], m.n_topics)
        got = build_tables_coded(corpus.term_ids, m.b_[0], m.n_topics, code, old_hash)
        assert got.col_entry is code  # the codes become the entries, in place
        assert_same_restaurants(got, want)
        m._tables[0] = got
    assert added[0] > 0 and min(added) < added[0]  # types added, and fewer once settled


def test_a_fit_merges_from_the_sweeps_types_and_gives_the_model_of_the_rebuild(monkeypatch):
    """fit's merges go through the sweeps' types, and the model is the one of rebuilds from b."""
    import models.tcm.model as tcm_model

    corpus = synthetic_corpus(120, 50, 40, seed=3, n_latent=4)
    split = (np.random.default_rng(1).random(corpus.n_tokens) < 0.2).astype(np.uint8)
    kw = dict(n_topics=6, n_chains=2, n_iter=6, n_shards=2, seed=2, alpha0=20.0)
    coded = TCM(**kw).fit(corpus, split=split)
    calls = []

    def rebuild_only(term_ids, b, n_topics, code, old_hash):
        calls.append(1)
        return build_tables(term_ids, b, n_topics)
    monkeypatch.setattr(tcm_model, "build_tables_coded", rebuild_only)
    rebuilt = TCM(**kw).fit(corpus, split=split)
    assert len(calls) == kw["n_chains"] * kw["n_iter"]
    for name in ("b_", "dt_topic_", "dt_count_", "dt_nnz_", "log_lik_"):
        np.testing.assert_array_equal(getattr(coded, name), getattr(rebuilt, name), err_msg=name)
