"""The AP-layout generator (retrieval.datasets.ap_synth) and ``topicir bench scale``."""
from __future__ import annotations

import gzip
import math
import re
from pathlib import Path

import numpy as np
import pytest

from retrieval.core.trec import read_collection
from retrieval.datasets import ap_synth
from retrieval.datasets.ap_synth import generate, vocabulary, wordnet_lemmas

DOCNO = re.compile(r"^AP\d{6}-\d{4}$")


@pytest.fixture(scope="module")
def collection(tmp_path_factory):
    """2,500 documents: two full files and a half one, as the TREC reader yields them."""
    out = tmp_path_factory.mktemp("ap")
    files = generate(out, 2500, n_terms=20_000, seed=7, progress=False)
    return out, files, list(read_collection(out))


def test_files_are_gzipd_sgml_of_a_thousand_documents_in_aps_layout(collection):
    out, files, docs = collection
    assert [f.name for f in files] == ["AP880101.gz", "AP880102.gz", "AP880103.gz"]
    raw = gzip.open(files[0], "rt").read()
    assert raw.count("<DOC>") == 1000 and raw.count("</DOC>") == 1000
    first = raw[:raw.index("</DOC>")]
    tags = re.findall(r"^<(\w+)>", first, re.M)
    assert tags == ["DOC", "DOCNO", "FILEID", "FIRST", "SECOND", "HEAD", "DATELINE", "TEXT"]
    assert "<DOCNO> AP880101-0001 </DOCNO>" in first and "(AP) </DATELINE>" in first


def test_the_trec_reader_yields_the_requested_documents_with_head_and_text(collection):
    _, files, docs = collection
    assert len(docs) == 2500 and len({d.docno for d in docs}) == 2500
    assert all(DOCNO.match(d.docno) for d in docs)
    assert docs[1000].docno == "AP880102-0001" and docs[-1].docno == "AP880103-0500"
    assert all(d.title and d.text for d in docs)
    # metadata stays out of what is indexed, as for real AP
    assert not any("(AP)" in d.contents or "AP-NR" in d.contents for d in docs[:50])


def test_lengths_follow_aps_distribution(collection):
    """Mean about 450 words, median below it, a long tail."""
    _, _, docs = collection
    n = np.array([len(d.text.split()) for d in docs])
    assert abs(n.mean() - 450) < 30
    assert np.median(n) < 0.9 * n.mean()
    assert np.percentile(n, 99) > 2.5 * n.mean()
    assert n.min() >= 20


def test_text_has_sentences_stopwords_and_a_zipfian_vocabulary(collection):
    _, _, docs = collection
    words = " ".join(d.text for d in docs[:500]).split()
    assert sum(w[-1] in ".?!" for w in words) > len(words) / 45  # sentences of at most ~40 words
    lower = [w.strip(".,?!").lower() for w in words]
    stop = sum(w in ap_synth.STOPWORDS for w in lower) / len(lower)
    assert 0.35 < stop < 0.5
    content = [w for w in lower if w not in ap_synth.STOPWORDS]
    _, counts = np.unique(content, return_counts=True)
    counts = np.sort(counts)[::-1]
    # Zipf: frequency falls about tenfold from rank 10 to rank 100 and again to rank 1000
    assert 4 < counts[9] / counts[99] < 25 and 4 < counts[99] / counts[999] < 25


def test_documents_have_latent_topics(collection):
    """Words co-occur by topic: two documents share more content words with each other when
    they share a topic than at random, so topic models have structure to find."""
    _, _, docs = collection
    gen = ap_synth.Generator(20_000, seed=7)
    topic_words = {int(t): set(map(str.lower, gen.words[gen.topic_words[t, :30]])) for t in range(ap_synth.N_LATENT)}
    bags = [set(w.strip(".,?!").lower() for w in d.text.split()) for d in docs[:400]]
    best = [max(topic_words, key=lambda t: len(b & topic_words[t])) for b in bags]
    hits = [len(b & topic_words[t]) for b, t in zip(bags, best)]
    # a random topic's top 30 words meet a document a few times at most
    rand = [len(b & topic_words[(t + 97) % ap_synth.N_LATENT]) for b, t in zip(bags, best)]
    assert np.mean(hits) > 3 * np.mean(rand) + 2


def test_topics_repeat_set_phrases_and_half_the_queries_hold_one(collection):
    """Each topic's set phrases occur whole, as adjacent words with no stopword inside, far more
    often than the same words in another order, so TCM has collocations to find; about half the
    queries start with one of their topic's phrases."""
    _, _, docs = collection
    gen = ap_synth.Generator(20_000, seed=7)
    text = " ".join(" ".join(w.strip(".,?!").lower() for w in d.text.split()) for d in docs[:500])
    phrases = [[str(w).lower() for w in gen.words[p[p >= 0]]] for p in gen.phrases[:, :5].reshape(-1, 3)]
    whole = sum(text.count(" " + " ".join(p) + " ") for p in phrases)
    reversed_ = sum(text.count(" " + " ".join(p[::-1]) + " ") for p in phrases)
    assert whole > 1000 and whole > 20 * reversed_
    assert gen.phrases.shape == (ap_synth.N_LATENT, ap_synth.PHRASES_PER_TOPIC, 3)
    assert ((gen.phrases >= 0).sum(-1) >= 2).all()
    queries = gen.queries(200)
    every = {" ".join(str(w).lower() for w in gen.words[p[p >= 0]]) for p in gen.phrases.reshape(-1, 3)}
    with_phrase = sum(any(q.startswith(p + " ") or q == p for p in every) for q in queries)
    assert 70 < with_phrase < 130
    assert all(2 <= len(q.split()) <= 4 for q in queries)


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    a = generate(tmp_path / "a", 120, n_terms=3000, seed=3, progress=False)
    b = generate(tmp_path / "b", 120, n_terms=3000, seed=3, progress=False)
    c = generate(tmp_path / "c", 120, n_terms=3000, seed=4, progress=False)
    assert a[0].read_bytes() == b[0].read_bytes()
    assert a[0].read_bytes() != c[0].read_bytes()


def test_a_rerun_reuses_its_files_and_grows_a_short_last_file(tmp_path):
    first = generate(tmp_path, 1500, n_terms=3000, seed=1, docs_per_file=1000, progress=False)
    stamp = first[0].stat().st_mtime_ns
    again = generate(tmp_path, 2000, n_terms=3000, seed=1, docs_per_file=1000, progress=False)
    assert again[0].stat().st_mtime_ns == stamp  # reused
    assert gzip.open(again[1], "rt").read().count("<DOC>") == 1000  # regrown to a full file
    assert sum(1 for _ in read_collection(tmp_path)) == 2000
    generate(tmp_path, 1000, n_terms=3000, seed=2, progress=False)  # other seed: regenerated
    assert first[0].stat().st_mtime_ns != stamp


def test_vocabulary_is_wordnet_words_and_says_so_without_wordnet(tmp_path):
    lemmas = wordnet_lemmas()
    if not lemmas:
        pytest.skip("WordNet is not installed (make wordnet)")
    v = vocabulary(5000, seed=0)
    assert v.n_wordnet == 5000 - len(ap_synth.NEWSWIRE) and set(v.words[len(ap_synth.NEWSWIRE):]) <= set(lemmas)
    bare = vocabulary(500, seed=0, wordnet=tmp_path)  # no WordNet files there
    assert bare.n_wordnet == 0 and "no WordNet" in bare.source and len(set(bare.words)) == 500


def test_two_point_fit_separates_the_proportional_part_from_the_other():
    from retrieval.bench.scale_fit import fit_two

    # memory = 2 per token + 5 per term, measured at two sizes
    a, b = fit_two(1000, 2 * 1000 + 5 * 300, 4000, 2 * 4000 + 5 * 600, 300, 600)
    assert a == pytest.approx(2) and b == pytest.approx(5)
    # time = 0.01 per doc + 0.3 fixed
    a, b = fit_two(100, 1.3, 300, 3.3, 1.0, 1.0)
    assert a == pytest.approx(0.01) and b == pytest.approx(0.3)
    # noise that would make the fixed part negative: all of it proportional, from the larger run
    assert fit_two(100, 1.0, 300, 3.3, 1.0, 1.0) == (pytest.approx(3.3 / 300), 0.0)
    # no growth at all: a fixed cost, not a negative slope
    assert fit_two(100, 2.0, 300, 1.9, 1.0, 1.0) == (0.0, pytest.approx(1.9))
    # memory growing slower than the tokens and faster than the vocabulary: all of it the
    # vocabulary's (count tables), not a token part that would multiply it by the token ratio
    assert fit_two(544_000, 1.67, 1_347_000, 2.19, 64_000, 90_000) == (0.0, pytest.approx(2.19 / 90_000))


def test_memory_by_parts_sees_the_arrays_that_grow_with_the_tokens():
    from retrieval.bench.scale_fit import memory_by_parts

    # arrays: 100 bytes a token; the rest of the peak: 0.3 GiB fixed + 1e-6 GiB a term
    def run(tokens, terms):
        arrays = 100 * tokens / 2**30
        return dict(n_tokens=tokens, n_terms=terms, retained_gib=arrays, base_gib=0.5,
                    peak_gib=0.5 + arrays + 0.3 + 1e-6 * terms)

    got = memory_by_parts(run(10**6, 60_000), run(2 * 10**6, 80_000), dict(tokens=10**8, terms=200_000))
    assert got == pytest.approx(100 * 10**8 / 2**30 + 0.3 + 0.2)


def test_batch_added_grows_only_the_parts_that_follow_the_documents():
    from retrieval.bench.scale_fit import batch_added

    # the model added 0.30 s on 5,000 documents: 0.20 s of tables and scoring, 0.10 s per query
    r = dict(n_docs=5000, batch_s=0.50, ql_batch_s=0.20, tables_s=0.15, extras_s=0.02, scoring_s=0.03)
    assert batch_added(r, 250_000) == pytest.approx(0.20 * 50 + 0.10)
    # noise that makes the parts exceed what the model added: the parts alone, nothing negative
    assert batch_added(dict(r, batch_s=0.30), 250_000) == pytest.approx(0.20 * 50)
    # a QL batch slower than the model's: nothing added
    assert batch_added(dict(r, batch_s=0.1, tables_s=0.0, extras_s=0.0, scoring_s=0.0), 250_000) == 0.0
    # runs written without the parts: all of what the model added, linear in documents
    old = dict(n_docs=5000, batch_s=0.50, ql_batch_s=0.20)
    assert batch_added(old, 250_000) == pytest.approx(0.30 * 50)
    # with the small run: each part a cost per document plus a fixed one through both runs:
    # tables 3e-5 s a document, extras 0.02 s fixed, scoring 5e-6 s a document + 0.005 s
    small = dict(n_docs=2000, batch_s=0.35, ql_batch_s=0.15, tables_s=0.06, extras_s=0.02, scoring_s=0.015)
    assert batch_added(r, 250_000, small) == pytest.approx(7.5 + 0.02 + 1.255 + 0.10)
    # a small run slower than the fraction (noise): that part linear through the fraction
    assert batch_added(r, 250_000, dict(small, scoring_s=0.05)) == pytest.approx(7.5 + 0.02 + 1.5 + 0.10)
    # the small collection at the fraction's sweeps ('early') pairs with the fraction instead of
    # the longer small run (whose settled tables are cheaper)
    early = dict(small, tables_s=0.12)
    settled = dict(small, tables_s=0.06, scoring_s=0.02)
    tables = 1e-5 * 250_000 + 0.10  # through (2000, 0.12) and (5000, 0.15)
    assert batch_added(r, 250_000, settled, early) == pytest.approx(tables + 0.02 + 1.255 + 0.10)
    assert batch_added(r, 250_000, small, small) == batch_added(r, 250_000, small)
    # the mixture's scoring of the query terms timed on the target collection replaces the
    # fitted part, for a kind with extra parts too (they are scored in their own part)
    from retrieval.bench.scale_fit import batch_added_parts

    assert batch_added_parts(dict(r, extras_s=0.0), 250_000, small, scoring_s=0.9)["scoring_s"] == 0.9
    parts = batch_added_parts(r, 250_000, small, scoring_s=0.9)
    assert parts["scoring_s"] == 0.9 and parts["extras_s"] == pytest.approx(0.02)
    assert batch_added_parts(r, 250_000, small)["scoring_s"] == pytest.approx(1.255)
    # finding the extra parts is compared per query that has one: the small run's model found
    # parts in 20 queries, the fraction's in 40, at the same 0.5 ms a query: a fixed cost, not
    # one that grows with the documents
    parts = batch_added_parts(dict(r, extras_s=0.02, extra_queries=40), 250_000,
                              dict(small, extras_s=0.01, extra_queries=20))
    assert parts["extras_s"] == pytest.approx(0.02)
    assert batch_added_parts(dict(r, extras_s=0.02), 250_000, dict(small, extras_s=0.01))["extras_s"] \
        == pytest.approx(0.01 / 3000 * 250_000 + 0.02 - 0.01 / 3000 * 5000)


def test_sweep_curve_follows_the_run_relative_to_its_early_sweeps():
    from retrieval.bench.scale_fit import sweep_curve

    steps = [9.0, 4.0, 4.0, 4.0, 3.0, 2.0, 2.0, 1.0, 1.0, 1.0, 1.0]  # setup, then settling
    curve = sweep_curve(steps, 4)  # early: sweeps 2-4, 4 s
    assert len(curve) == 10 and curve[0] == 1.0 and curve[-1] == 0.25
    assert all(a >= b for a, b in zip(curve, curve[1:]))  # a running median keeps the trend
    assert sweep_curve([5.0, 2.0, 2.0], 3) == [1.0, 1.0] and sweep_curve([5.0], 1) == [1.0]
    assert max(sweep_curve([1.0, 0.1, 0.1, 0.1, 0.2, 0.2, 0.2, 0.2], 4)) == 1.0  # noise, not a slow-down


def test_the_target_vocabulary_follows_heaps_law_up_to_the_generators():
    from retrieval.bench.scale_fit import target_size

    full = dict(n_tokens=1_000_000, n_terms=40_000, n_docs=10_000, batch_s=0.5)
    frac = dict(n_tokens=100_000, n_terms=10_000, n_docs=1_000)  # beta = log 4 / log 10
    t = target_size(full, frac, 10.0, 10**9)
    assert t["tokens"] == 10_000_000 and t["docs"] == 100_000 and t["terms"] == pytest.approx(160_000)
    assert t["ql_batch_s"] == 5.0  # exact QL of the whole collection, linear in documents
    assert "scoring_s" not in t and target_size(dict(full, scoring_s=0.2), frac, 10.0, 10**9)["scoring_s"] == 2.0
    assert target_size(full, frac, 10.0, 50_000)["terms"] == 50_000
    assert target_size(full, frac, 1.0, 10**9)["terms"] == 40_000


@pytest.mark.slow
def test_a_tiny_bench_scale_run_gives_finite_figures_against_the_targets(tmp_path):
    """Two files of documents, LDA only, trained on both and on one of them (about two minutes:
    every child process starts the JVM)."""
    from retrieval.bench.scale import run

    tables = run(kinds=["lda"], docs=2000, fraction=1.0, sweeps=2, small_sweeps=4, terms=3000, work=str(tmp_path))
    targets, details, profile = tables
    assert [r["measure"].split(":")[0] for r in targets.rows][-3:] == ["lda"] * 3
    assert all(r[""] in ("met", "missed") for r in targets.rows)
    for r in targets.rows:
        value, unit = r["figure"].split()
        assert math.isfinite(float(value)) and float(value) > 0 and r["target"].endswith(unit)
    (row,) = details.rows
    assert set(row) >= {"kind", "setup s*", "s per sweep/epoch of 1 chain*", "measured: tokens", "measured: batch s"}
    assert row["kind"] == "lda" and row["samples kept"] == 2  # per chain: both sweeps kept
    assert all(math.isfinite(float(row[k])) for k in ("setup s*", "s per sweep/epoch of 1 chain*", "measured: batch s"))
    assert row["small: tokens"] and math.isfinite(float(row["small: batch s"]))
    assert len(row["small: s per step"].split()) == 4 and float(row["late sweeps*"]) > 0
    assert any("The mixture's scoring is also timed on the whole collection" in n for n in targets.notes)
    # where the time goes: the parts add up to the first table's training and batch figures
    (part,) = profile.rows
    train = float(next(r["figure"].split()[0] for r in targets.rows if r["measure"].startswith("lda: default training")))
    batch = float(next(r["figure"].split()[0] for r in targets.rows if r["measure"].startswith("lda: 100-query batch")))
    assert float(part["setup min"]) + float(part["sweeps (epochs) min"]) + float(part["finishing min"]) \
        == pytest.approx(train, abs=0.2)
    assert sum(float(part[c]) for c in ("exact QL s", "P_TM tables s", "extra tables s", "mixture scoring s",
                                        "rest (per query) s")) == pytest.approx(batch, abs=0.03)
    # the small collection trained for the fraction's sweeps too, for the batch's fit
    assert float(row["small, early sweeps: P_TM tables s"]) > 0 and float(row["small: P_TM tables s"]) > 0
    assert "the first 2 files (2,000 documents" in targets.notes[1]  # the whole collection
    assert "the first 1 files (1,000 documents" in targets.notes[1]  # and the small fraction


def test_a_fraction_that_trained_the_whole_schedule_is_projected_from_its_own_sweeps():
    from retrieval.bench.scale_fit import projection

    sweeps = [9.0, 8.0, 6.0, 5.0, 4.0, 4.0, 3.0, 3.0, 3.0, 3.5]  # the first one counts as setup

    def run(tokens, terms, scale):  # time proportional to the tokens, sweep after sweep
        return dict(defaults=dict(n_iter=10, n_chains=1), n_docs=tokens // 100, n_tokens=tokens,
                    n_terms=terms, inputs_s=0.0, steps=[x * scale for x in sweeps], finish_s=0.0,
                    peak_gib=1.0, base_gib=0.5, retained_gib=0.1, batch_s=0.2, ql_batch_s=0.1)

    small, frac = run(10**6, 50_000, 1.0), run(2 * 10**6, 70_000, 2.0)
    target = dict(docs=200_000, tokens=2 * 10**7, terms=300_000, ql_batch_s=1.0)
    got = projection(frac, small, target)
    # ten times the fraction's tokens: ten times each of its sweeps, the early ones included
    assert got["sweeps_s"] == pytest.approx(10 * sum(frac["steps"][1:]))
    assert got["late_chain_s"] == pytest.approx(10 * 2.0 * 3.0)  # median of the last five
    # a fraction that stopped early follows the small run's curve instead, its early sweeps
    # held at their median (a curve capped at 1): less than the sweeps measured
    short = dict(frac, steps=frac["steps"][:4])
    assert projection(short, small, target)["sweeps_s"] < got["sweeps_s"]


def test_projection_of_mini_batch_training_counts_the_vocabulary_at_every_step():
    from retrieval.bench.scale_fit import projection

    # an epoch: 1 s per M tokens plus 1e-6 s per term at every step of 100 documents
    def run(docs, tokens, terms):
        epoch = tokens / 1e6 + 1e-6 * -(-docs // 100) * terms
        return dict(defaults=dict(epochs=10, batch_size=100), n_docs=docs, n_tokens=tokens, n_terms=terms,
                    inputs_s=0.0, steps=[epoch] * 3, finish_s=0.0, peak_gib=1.0, base_gib=0.5,
                    retained_gib=0.1, batch_s=0.2, ql_batch_s=0.1)

    target = dict(docs=100_000, tokens=10**8, terms=300_000, ql_batch_s=1.0)
    got = projection(run(2000, 10**6, 50_000), run(5000, 2.5 * 10**6, 80_000), target)
    epoch = 100 + 1e-6 * 1000 * 300_000  # 100 s of tokens, 300 s of steps x terms
    assert got["per_chain_s"] == pytest.approx(epoch)
    assert got["train_min"] == pytest.approx(10 * epoch / 60)
    # the profile's parts add up to the figures
    assert (got["setup_s"] + got["sweeps_s"] + got["finish_s"]) / 60 == pytest.approx(got["train_min"])
    assert got["batch_parts"]["ql_s"] == 1.0 and got["batch_s"] == pytest.approx(sum(got["batch_parts"].values()))



def test_an_epoch_whose_vocabulary_parts_were_timed_is_projected_by_its_parts():
    from retrieval.bench.scale_fit import epoch_by_parts, projection

    # 5,000 documents in steps of 200: 25 steps of 20 ms vocabulary-sized work and 0.1 s of
    # M-step in an epoch of 2 s; the other 1.4 s follow the tokens
    def run(docs, tokens, terms, epoch, first):
        return dict(defaults=dict(epochs=10, batch_size=200), n_docs=docs, n_tokens=tokens, n_terms=terms,
                    inputs_s=0.0, steps=[first] + [epoch] * 9, finish_s=0.0, peak_gib=1.0, base_gib=0.5,
                    retained_gib=0.1, batch_s=0.2, ql_batch_s=0.1, vocab_step_s=0.02, mstep_s=0.1)

    frac, small = run(5000, 10**6, 10**5, 2.0, 3.0), run(2000, 4 * 10**5, 6 * 10**4, 0.9, 1.5)
    target = dict(docs=250_000, tokens=5 * 10**7, terms=2 * 10**5, ql_batch_s=1.0)
    want = 1.4 * 50 + (0.02 * 1250 + 0.1) * 2  # the rest x 50 tokens, the vocabulary parts x steps x terms
    assert epoch_by_parts(frac, 2.0, target) == pytest.approx(want)
    got = projection(frac, small, target)
    assert got["per_chain_s"] == pytest.approx(want)
    # the first epoch: an epoch plus its excess (1 s on the fraction, 0.6 s on the small run),
    # fitted through both runs as before
    assert got["setup_s"] > want and got["setup_s"] - want < 1.0 * 50 * 2
    # without the timed parts the same runs fall back to the two-run fit of the whole epoch
    plain = {k: v for k, v in frac.items() if k not in ("vocab_step_s", "mstep_s")}
    assert projection(plain, {k: v for k, v in small.items() if k not in ("vocab_step_s", "mstep_s")},
                      target)["per_chain_s"] != pytest.approx(want)


def test_the_step_clock_times_the_steps_of_the_epochs_after_the_first_and_changes_no_draw():
    from models.avipam.model import AVIPAM
    from models.common.corpus import synthetic_corpus
    from retrieval.bench.avipam_steps import PARTS, time_parts

    corpus = synthetic_corpus(120, 300, 20, seed=0)
    kw = dict(AVIPAM.quick_params, epochs=3, batch_size=50)
    model = AVIPAM(**kw)
    clock = time_parts(model, "cpu")
    model.fit(corpus, callback=lambda m, epoch, total: clock.epoch_done(epoch, total))
    assert clock.steps == 2 * 3  # epochs 2 and 3, three batches of 120 documents each
    assert len(clock.mstep) == 2  # the closed-form topics at the end of those epochs
    one_by_one = [p for p in PARTS if p != "chains side by side"]
    timed = sum(clock.parts[p] for p in one_by_one)
    assert all(clock.parts[p] > 0 for p in one_by_one) and timed <= clock.parts["step"]
    assert "chains side by side" not in clock.parts
    ref = AVIPAM(**kw).fit(corpus)
    for name in ("topic_word_", "doc_mix_", "log_lik_"):
        np.testing.assert_array_equal(getattr(model, name), getattr(ref, name), err_msg=name)


def test_bench_avipam_steps_projects_the_parts_it_timed():
    from retrieval.bench.avipam_steps import run

    (table,) = run(docs=300, terms=2000, mean_len=30.0, epochs=3, target_docs=3000, threads=1)
    rows = {r["part"]: r for r in table.rows}
    per_step = [float(rows[p]["ms per step"]) for p in ("batch input", "forward", "backward", "dense gradients",
                                                        "Adam step", "other")]
    assert sum(per_step) == pytest.approx(float(rows["step"]["ms per step"]), abs=0.05)
    # 3,000 documents in batches of 200: 15 steps an epoch; 100 epochs and the finishing
    assert float(rows["step"]["projected s per epoch"]) == pytest.approx(15 * float(rows["step"]["ms per step"]) / 1000,
                                                                         abs=0.06)
    total = 100 * float(rows["training"]["projected s per epoch"]) / 60 + float(rows["finishing"]["projected min, all epochs"])
    # the table rounds to 0.1: 100 epochs of half a tenth of a second, the finishing's and the total's own rounding
    assert float(rows["training"]["projected min, all epochs"]) == pytest.approx(total, abs=100 * 0.05 / 60 + 0.1 + 1e-9)
    assert "400 steps" not in table.notes[0] and "the 4 steps of the epochs after the first" in table.notes[0]


def test_bench_avipam_steps_times_the_chains_side_by_side_as_one_part():
    """Several chains on CPU threads run each chain's forward, backward and dense gradients on
    its own thread: one part, timed, and no rows of zeros for the three it replaces."""
    from retrieval.bench.avipam_steps import run

    (table,) = run(docs=300, terms=2000, mean_len=30.0, epochs=3, target_docs=3000, threads=2)
    rows = {r["part"]: r for r in table.rows}
    assert not {"forward", "backward", "dense gradients"} & set(rows)
    per_step = [float(rows[p]["ms per step"]) for p in ("batch input", "chains side by side", "Adam step", "other")]
    assert min(per_step[:3]) > 0 and float(rows["chains side by side"]["ms per step"]) > float(rows["other"]["ms per step"])
    assert sum(per_step) == pytest.approx(float(rows["step"]["ms per step"]), abs=0.05)
    assert "n_chains=3" in table.notes[-1]


def test_bench_avipam_steps_refuses_a_device_before_making_its_corpus(monkeypatch):
    import retrieval.bench.avipam_steps as steps

    monkeypatch.setattr(steps, "_corpus", lambda *a: pytest.fail("the corpus was made"))
    with pytest.raises(ValueError, match="device must be a torch device string"):
        steps.run(device="gpu")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="torch sees no CUDA device"):
            steps.run(device="cuda")

def test_the_scoring_timing_mixes_the_one_valued_tables_in(tmp_path):
    """The mixture's scoring timed on the whole collection (bench.scale_batch) must score under
    the mixture, not fall back to plain QL for want of a model."""
    from retrieval.bench.scale_batch import mixture_scorings
    from retrieval.core.index import build_index
    from retrieval.core.scoring import LAM, Scorer

    index = build_index([Path(__file__).parent / "data" / "docs.trec"], tmp_path / "ix")
    ((scorer, query, table),) = mixture_scorings(index, ["rail", "zzzunindexed"])
    ql = Scorer(index.stats, lam=1.0).score(query)
    # one term: log(LAM P_QL(w|d) + (1 - LAM) 1e-4) for every document
    np.testing.assert_allclose(scorer.score(query, table), np.log(LAM * np.exp(ql) + (1 - LAM) * 1e-4), rtol=1e-12)


def test_extra_parts_count_only_the_queries_a_kind_adds_a_part_to(monkeypatch):
    """A query without a multi-word collocation costs TCM its segmentation alone, a per-query
    cost: the 'extra parts' part, extrapolated with the documents, holds only the queries with
    a part (finding it)."""
    import time
    from types import SimpleNamespace

    from retrieval.bench import scale_batch
    from retrieval.core import extension, ranking

    calls = []

    def find_extras(index, texts, model):
        out = []
        for text in texts:
            time.sleep(0.002)  # the segmentation
            if "phrase" in text:
                calls.append(text)
                time.sleep(0.01)  # the exact occurrences
            out.append("its part" if "phrase" in text else None)
        return out

    prepared = SimpleNamespace(p_w=np.ones(1), query=None, p_extra=None)
    monkeypatch.setattr(extension, "document_model", lambda model, index: model)
    monkeypatch.setattr(scale_batch, "Scorer", lambda stats, lam, model: SimpleNamespace(score=lambda q, p_w: None))
    monkeypatch.setattr(ranking, "find_extras", find_extras)
    monkeypatch.setattr(ranking, "batch_tables", lambda index, queries, model, extras, top=None: [(None, (None, None))] * len(queries))
    monkeypatch.setattr(ranking, "prepare", lambda *a, **k: prepared)
    monkeypatch.setattr(scale_batch, "BATCH_REPEATS", 2)
    model = SimpleNamespace(kind="tcm")
    index = SimpleNamespace(stats=None)
    assert scale_batch._document_parts(index, ["two words", "three more words"], model)["extras_s"] == 0.0
    assert not calls
    got = scale_batch._document_parts(index, ["two words", "a phrase query"], model)["extras_s"]
    assert 0.012 <= got < 0.05 and calls == ["a phrase query"] * 3  # found once, then timed twice
