"""``topicir bench ray``: the cost models' formulas (Gibbs kinds, aviPAM's all-reduces) give known
numbers for known inputs, and the quick command trains every kind on Ray and writes its tables
(slow: a Ray cluster)."""
import math
import re

import numpy as np
import pytest

from retrieval.bench import ray_cost as cost
from retrieval.bench import ray_train

PARTS = cost.Parts(rate=2e6, latency=0.005, setup_s_per_token=1e-6, start_s=3.0, driver_s_per_token=1e-8,
                   event_s_per_token=2e-8, state_bytes_per_token=10.0, layout_bytes_per_token=20.0,
                   worker_bytes_per_token=0.0, driver_bytes_per_token=0.0, sync_bytes_per_token=12.0,
                   restaurant_bytes_per_token=40.0, nodes_per_term=1.5, inner_per_term=0.25)
SIZES = cost.Sizes(k=800, n_totals=800, chains=3, sweeps=100, events=10)
COLL = cost.Collection("c", 1000, 1e8, 1e5)


def test_grown_collection_follows_heaps_law():
    ten = cost.grown(cost.AP, 10, 0.5)
    assert ten.name == "10xAP" and ten.tokens == pytest.approx(705e6) and ten.docs == 2_500_000
    assert ten.terms == pytest.approx(200_000 * math.sqrt(10))


def test_zipf_frequencies_sum_to_the_tokens_and_fall_as_one_over_rank():
    cf = cost.zipf_frequencies(1000.0, 4)
    assert cf.sum() == pytest.approx(1000.0)
    np.testing.assert_allclose(cf, 1000.0 / (1 + 1 / 2 + 1 / 3 + 1 / 4) * np.array([1, 1 / 2, 1 / 3, 1 / 4]))


def test_lda_list_bytes_counts_min_of_frequency_and_topics():
    # 3 terms: 4 bytes each for the lengths, then min(cf, K) = 5 + 2 + 0 int32 entries
    assert cost.lda_list_bytes([10, 2, 0], 5) == 3 * 4 + 4 * 7
    # a frequency beyond the int32 count bits left by K = 800 (10 topic bits): int64 entries
    assert cost.lda_list_bytes([2 ** 21 + 1, 1], 800) == 2 * 4 + 8 * 801


def test_state_bytes_of_every_kind():
    assert cost.state_bytes("pam", COLL, SIZES, PARTS) == 4 * 1e5 * 800
    assert cost.state_bytes("tree-lda", COLL, SIZES, PARTS) == 4 * 800 * (1.5 + 0.25) * 1e5
    assert cost.state_bytes("tcm", COLL, SIZES, PARTS) == 40 * 1e8
    assert cost.state_bytes("glda", COLL, SIZES, PARTS) == 0
    lda = cost.state_bytes("lda", COLL, SIZES, PARTS)
    assert lda == cost.lda_list_bytes(cost.zipf_frequencies(1e8, 1e5), 800) and 4e5 < lda < 4 * 1e5 * 800 + 4e5


def test_sweep_bytes_of_the_partition_rounds_tcm_and_glda():
    L = 1e9
    # one worker: nothing leaves it
    assert cost.sweep_bytes("lda", 1, COLL, SIZES, L) == 0
    # W = 4: every worker's link carries L once per chain; the totals: 4 deltas in, 5 sums out, 4 rounds
    assert cost.sweep_bytes("lda", 4, COLL, SIZES, L) == 3 * L + 3 * 4 * 9 * 8 * 800
    # TCM: the driver sends W copies of the restaurants and takes the boundaries back, every chain
    assert cost.sweep_bytes("tcm", 4, COLL, SIZES, L) == 3 * (4 * L + 4 * 1e8)
    assert cost.sweep_bytes("glda", 32, COLL, SIZES, L) == 0


def test_projection_parts_and_total():
    pr = cost.project("pam", COLL, 8, SIZES, PARTS, gbps=8.0)  # 1e9 bytes/s
    L = 4 * 1e5 * 800
    assert pr["compute"] == pytest.approx(100 * 3 * 1e8 / (8 * 2e6))
    assert pr["transfer"] == pytest.approx(100 * (3 * L + 3 * 8 * 17 * 8 * 800) / 1e9)
    assert pr["latency"] == pytest.approx(100 * 3 * 8 * 0.005)
    assert pr["driver"] == pytest.approx(100 * 1e8 * 1e-8)
    assert pr["setup"] == pytest.approx(1e8 * 1e-6 + 3.0 + 1e8 * (3 * 10 + 20) / 1e9)
    assert pr["syncs"] == pytest.approx(10 * 3 * 1e8 * (2e-8 + 12 / 1e9))
    assert pr["total"] == pytest.approx(sum(pr[k] for k in ("compute", "transfer", "latency", "driver", "setup",
                                                            "syncs")))


def test_glda_uses_at_most_one_worker_per_chain():
    few, many = (cost.project("glda", COLL, w, SIZES, PARTS, 10.0) for w in (2, 32))
    assert few["workers_used"] == 2 and many["workers_used"] == 3
    assert few["compute"] == pytest.approx(100 * 2 * 1e8 / 2e6)  # two chains on one worker
    assert many["compute"] == pytest.approx(100 * 1e8 / 2e6)
    assert many["transfer"] == 0 and many["latency"] == pytest.approx(100 * 0.005)


def test_tcm_with_the_state_on_the_workers_moves_restaurants_worker_to_worker():
    """A worker is sent its part of the restaurants (W^-beta of them) and sends its documents'
    restaurants to their owners, as owner about as much again, in two rounds; on the driver, W
    copies of the restaurants out and the boundaries back through the driver's link."""
    here = PARTS._replace(on_workers=True, changed_bytes_per_token=6.0, restaurant_bytes_per_token=8.0)
    one, many = (cost.project("tcm", COLL, w, SIZES, here, 8.0) for w in (1, 32))
    assert one["workers_used"] == 1 and many["workers_used"] == 32
    assert one["sweep_bytes"] == 0 and many["state_bytes"] == 8 * 1e8
    assert many["sweep_bytes"] == pytest.approx(2 * 3 * (8 * 1e8 / math.sqrt(32) + 6 * 1e8 / 32) * 31 / 32)
    assert many["compute"] == pytest.approx(100 * 3 * 1e8 / (32 * 2e6))
    assert many["latency"] == pytest.approx(100 * 2 * 0.005)
    driver = cost.project("tcm", COLL, 32, SIZES, PARTS, 10.0)
    assert driver["workers_used"] == 32 and driver["sweep_bytes"] == 3 * (32 * 40 * 1e8 + 4 * 1e8)


def test_more_workers_cut_compute_but_not_the_driver():
    a, b = (cost.project("lda", COLL, w, SIZES, PARTS, 10.0) for w in (8, 32))
    assert b["compute"] == pytest.approx(a["compute"] / 4)
    assert b["driver"] == a["driver"] and b["latency"] == pytest.approx(4 * a["latency"])


def test_state_on_the_workers_spreads_setup_and_syncs():
    """The workers initialise and sync side by side: per-token work divided by W, a running sum
    passing W workers (W latencies) a sync; compute, transfer and the driver are unchanged."""
    here = PARTS._replace(on_workers=True)
    for w in (8, 32):
        a, b = cost.project("lda", COLL, w, SIZES, PARTS, 8.0), cost.project("lda", COLL, w, SIZES, here, 8.0)
        assert b["setup"] == pytest.approx(1e8 * 1e-6 / w + 3.0 + 1e8 * (3 * 10 + 20) / 1e9)
        assert b["syncs"] == pytest.approx(10 * 3 * (1e8 * (2e-8 / w + 12 / 1e9) + w * 0.005))
        for part in ("compute", "transfer", "latency", "driver"):
            assert b[part] == a[part]
    # TCM's and gLDA's shards: spread over every worker
    for kind in ("tcm", "glda"):
        t = cost.project(kind, COLL, 32, SIZES, here, 8.0)
        assert t["setup"] == pytest.approx(1e8 * 1e-6 / 32 + 3.0 + 1e8 * (3 * 10 + 20) / 1e9)


TRAIN = ray_train.TrainParts(doc_s_per_token=1e-6, grad_s_per_term=5e-9, adam_s_per_term=1.5e-8, mstep_s_per_term=1e-7,
                             finish_s_per_doc=1e-3, start_s=5.0, param_bytes=4e6, n_terms=10_000,
                             grad_bytes_per_term=400.0, batch_tokens=10_000.0, batch_terms=2_500.0,
                             epoch_bytes_per_term=800.0, small_calls_per_step=8,
                             hop_latency=1e-4, corpus_bytes_per_token=4.0, batch_size=200)


def test_ring_allreduce_sends_two_w_minus_one_w_ths_and_waits_two_w_minus_one_hops():
    assert ray_train.allreduce_seconds(1e9, 1, 1e9, 1e-3) == 0  # one worker: nothing to sum
    # W = 4: 6 ring steps of a quarter each
    assert ray_train.allreduce_seconds(1e9, 4, 1e9, 1e-3) == pytest.approx(6 * (0.25 + 1e-3))
    assert ray_train.allreduce_seconds(0.0, 8, 1e9, 1e-3) == pytest.approx(14e-3)


def test_avipam_projection_splits_documents_not_the_replicated_parts():
    coll = cost.Collection("c", 100_000, 1e7, 50_000)
    bw = 1e9  # 8 Gb/s
    one, eight = (ray_train.project(coll, w, 10, TRAIN, 8.0) for w in (1, 8))
    steps = 500  # ceil(100,000 / 200)
    assert one["steps"] == eight["steps"] == steps
    P = 4e6 + 400.0 * (50_000 - 10_000)  # the parameters grow with the vocabulary
    # a batch's tokens: 200 documents of 100; its terms by Heaps' law (beta 0.5) from the bench's
    terms = 2_500.0 * (20_000 / 10_000) ** 0.5
    G = P - 400.0 * (50_000 - terms)  # the first layers' rows of the batch's terms only
    mask = 4 * 50_000
    assert eight["batch_terms"] == pytest.approx(terms) and eight["param_bytes"] == pytest.approx(P)
    assert eight["grad_bytes"] == pytest.approx(G + mask)
    assert one["compute"] == pytest.approx(10 * steps * 1e-6 * 200 * 100)  # a batch's tokens, one worker
    assert eight["compute"] == pytest.approx(one["compute"] / 8)
    assert eight["replicated"] == one["replicated"] == pytest.approx(10 * steps * 2e-8 * 50_000)
    assert one["allreduce"] == 0
    assert eight["allreduce"] == pytest.approx(10 * steps * (14 * (mask / 8 / bw + 1e-4) + 14 * (G / 8 / bw + 1e-4)
                                                             + 8 * 14 * 1e-4))
    assert eight["M-step"] == pytest.approx(10 * (1e-7 * 50_000 + 14 * (800.0 * 50_000 / 8 / bw + 1e-4)))
    assert eight["setup"] == pytest.approx(5.0 + 4.0 * 1e7 / bw)  # the corpus sent once, a range to each worker
    assert one["finishing"] == pytest.approx(100.0)  # the posteriors: 200 batches of 500 documents
    assert eight["finishing"] == pytest.approx(25 * 500 * 1e-3)  # 25 batches on every worker
    assert one["exchange"] == eight["exchange"] == 0
    assert eight["total"] == pytest.approx(sum(eight[k] for k in ("compute", "replicated", "allreduce", "exchange",
                                                                  "M-step", "setup", "finishing")))
    # Adam's state partitioned: its step split among the workers, the parameters all-gathered every step
    part = ray_train.project(coll, 8, 10, TRAIN, 8.0, adam="partitioned")
    assert part["replicated"] == pytest.approx(10 * steps * (5e-9 + 1.5e-8 / 8) * 50_000)
    assert part["exchange"] == pytest.approx(10 * steps * 7 * (P / 8 / bw + 1e-4))  # the parameters, whole
    for k in ("compute", "allreduce", "M-step", "setup", "finishing"):
        assert part[k] == eight[k], k
    assert ray_train.project(coll, 1, 10, TRAIN, 8.0, adam="partitioned")["exchange"] == 0


def test_a_batch_never_has_more_terms_than_the_vocabulary():
    coll = cost.Collection("c", 1_000, 1e9, 5_000)  # long documents, a small vocabulary
    p = ray_train.project(coll, 8, 10, TRAIN, 8.0)
    assert p["batch_terms"] == 5_000 and p["grad_bytes"] == pytest.approx(p["param_bytes"] + 4 * 5_000)


def test_batch_terms_counts_distinct_terms_of_random_batches():
    from models.common.corpus import corpus_from_docs

    data = corpus_from_docs([[0, 0, 1], [1, 2], [3]], n_terms=5)
    # every batch of 3 documents is the corpus: 6 tokens, 4 distinct terms
    assert ray_train.batch_terms(data, 3, n_batches=5) == dict(batch_tokens=6.0, batch_terms=4.0)


def test_ring_allgather_sends_w_minus_one_w_ths():
    assert ray_train.allgather_seconds(1e9, 1, 1e9, 1e-3) == 0
    assert ray_train.allgather_seconds(1e9, 4, 1e9, 1e-3) == pytest.approx(3 * (0.25 + 1e-3))


@pytest.mark.slow
def test_quick_command_writes_every_kind(shared_data, tmp_path, monkeypatch, capsys):
    pytest.importorskip("ray")
    from retrieval.bench.ray import GIBBS as KINDS
    from retrieval.ui.cli import main

    monkeypatch.setenv("TOPICIR_QUICK", "1")
    out = tmp_path / "bench-ray.md"
    assert main(["-q", "bench", "ray", "--data", str(shared_data / "20news" / "20news-bydate.tar.gz"),
                 "--write", str(out)]) == 0
    text = out.read_text()
    for title in ("Gibbs kinds on Ray against the local trainer", "What each kind moves per sweep",
                  "Measured parts of the cost model", "Projected training on a Ray cluster", "Scale-out target"):
        assert f"## {title}" in text
    measured = text.split("## What each kind")[0]
    for kind in KINDS:
        assert re.search(rf"^\| {kind} \| [\d,]+ \| ray 2 \|", measured, re.M), kind
    from models.common.executors.ray import WORKER_STATE_KINDS

    for kind in WORKER_STATE_KINDS:
        assert re.search(rf"^\| {kind} \| [\d,]+ \| ray 2 \(state on workers\) \|", measured, re.M), kind
        assert f"| {kind} (state on workers) |" in text.split("## Projected")[1]
    assert "| False |" not in measured
    assert measured.count("| True |") == 2 * (len(KINDS) + len(WORKER_STATE_KINDS))
    assert "10xAP lda (state on workers) training on 32 workers" in text and ("| met |" in text or "| missed |" in text)
    # aviPAM on Ray Train: the local ELBO trace on 1 and 2 workers to rounding, its all-reduces counted, projected
    avi = text.split("## aviPAM on Ray Train against one process")[1]
    for w in (1, 2):
        row = re.search(rf"^\| ray {w} \|.*\| ([\d.e+-]+) \| ([\d.e+-]+) \|$", avi, re.M)
        assert row and float(row.group(1)) < 1e-4 and float(row.group(2)) < 1e-2, w
    assert "## aviPAM: measured parts of the cost model" in avi
    assert re.search(r"^\| 10xAP \| 128 \| replicated \|", avi.split("## aviPAM: projected")[1], re.M)
    assert re.search(r"^\| 10xAP \| 128 \| partitioned \|", avi.split("## aviPAM: projected")[1], re.M)
    # the partitioned run: the replicated model to rounding, its ranges exchanged every step
    row = re.search(r"^\| ray 2, Adam partitioned \|(.*)\|$", avi, re.M)
    assert row and float(row.group(1).split("|")[5]) > 0  # parameters MB/step


def test_sharded_glda_on_workers_uses_every_worker_and_moves_the_counts_worker_to_worker():
    parts = PARTS._replace(on_workers=True, changed_bytes_per_token=1.5)
    pr = cost.project("glda", COLL, 32, SIZES, parts, gbps=8.0)  # 1e9 bytes/s
    assert pr["workers_used"] == 32
    assert pr["compute"] == pytest.approx(100 * 3 * 1e8 / (32 * 2e6))
    # a worker is sent every chain's counts of its terms (V / sqrt(32) of them by Heaps' law), 4 K
    # bytes a term, and sends its share of the changed entries; as owner about as much again;
    # 31/32 of it to other workers
    per_sweep = 2 * 3 * (4 * 800 * 1e5 / math.sqrt(32) + 1.5 * 1e8 / 32) * 31 / 32
    assert cost.sweep_bytes("glda", 32, COLL, SIZES, 0.0, True, 1.5) == pytest.approx(per_sweep)
    assert cost.sweep_bytes("glda", 32, COLL, SIZES, 0.0, True, 1.5, heaps_beta=0.0) == pytest.approx(
        2 * 3 * (4 * 800 * 1e5 + 1.5 * 1e8 / 32) * 31 / 32)  # every worker holding every term
    assert cost.sweep_bytes("glda", 1, COLL, SIZES, 0.0, True, 1.5) == 0
    assert pr["transfer"] == pytest.approx(100 * per_sweep / 1e9)
    assert pr["latency"] == pytest.approx(100 * 2 * 0.005)  # two rounds a sweep, every chain at once
    assert cost.project("glda", COLL, 32, SIZES, PARTS, 8.0)["workers_used"] == 3  # on the driver: whole chains
