"""Collocation views of a trained TCM: what each topic's restaurant serves.

    topicir tcm-view --index indexes/cran --model indexes/cran/models/tcm-k100-c3-i100-s0-99776a7e.npz

For every topic (largest first), its top collocations by P(c|t) and by smoothed P(t|c) with a
pseudo-count of 5 (how the paper builds its word-intrusion lists), and the most frequent
multi-word collocations of the whole collection. Terms are shown as the index analysed them
(Porter stems).
"""
from __future__ import annotations

import numpy as np

PSEUDO = 5.0


def _show(model, terms, type_id) -> str:
    return " ".join(terms[w] for w in model.collocation_terms(type_id))


def topic_order(model, chain: int = 0) -> np.ndarray:
    """Topics by their mean number of collocations over the kept samples of ``chain``, largest first."""
    css = list(model._cs_of_chain(chain))
    size = model.n_k_samples_[css].mean(axis=0)
    return np.lexsort((np.arange(model.n_topics), -size))


def collocation_rows(model, terms, topics=None, n_topics: int = 10, top: int = 10, chain: int = 0,
                     min_len: int = 1, pseudo: float = PSEUDO) -> list[dict]:
    """One row per topic: ``{"topic", "size", "p_c_t": [(collocation, P(c|t), n_tc)],
    "p_t_c": [(collocation, P(t|c), n_tc)]}``; ``topics`` defaults to the ``n_topics`` largest."""
    css = list(model._cs_of_chain(chain))
    size = model.n_k_samples_[css].mean(axis=0)
    topics = topic_order(model, chain)[:n_topics] if topics is None else topics
    rows = []
    for k in topics:
        row = {"topic": int(k), "size": float(size[k])}
        for by in ("p_c_t", "p_t_c"):
            ids, scores, counts = model.topic_collocations(int(k), top=top, chain=chain, by=by,
                                                           min_len=min_len, pseudo=pseudo)
            row[by] = [(_show(model, terms, i), float(s), float(c)) for i, s, c in zip(ids, scores, counts)]
        rows.append(row)
    return rows


def phrase_rows(model, terms, top: int = 30, min_len: int = 2, chain: int = 0) -> list[tuple[str, float]]:
    """The most frequent collocations of at least ``min_len`` terms over all topics."""
    ids, counts = model.top_collocations(top=top, min_len=min_len, chain=chain)
    return [(_show(model, terms, i), float(c)) for i, c in zip(ids, counts)]


def view_text(rows, phrases=None) -> str:
    out = []
    if phrases:
        out.append("Most frequent multi-word collocations (mean count over kept samples):")
        out.append("  " + "; ".join(f"{p} ({c:.0f})" for p, c in phrases))
        out.append("")
    for row in rows:
        out.append(f"topic {row['topic']} ({row['size']:.0f} collocations)")
        out.append("  by P(c|t): " + "; ".join(c for c, _, _ in row["p_c_t"]))
        out.append("  by P(t|c): " + "; ".join(c for c, _, _ in row["p_t_c"]))
    return "\n".join(out)


def collocation_ablation(data, collections, indexes="indexes", k: int = 100, lam: float = 0.7,
                         mu: float = 1000.0, train: dict | None = None) -> list[dict]:
    """MAP of TCM smoothing with and without its collocation term, on the shared collections.

    Columns: QL; "TCM words" (omega = 0: every query term mixed with P_TCM(w|d), w as a
    one-word collocation); "TCM" (plus the collocation term, omega = OMEGA); "QL + phrases"
    (the collocation term with lam = 1 for it: exact-phrase counts of the TCM segmentation, no
    topic model, added to QL). Models are those of ``topicir smoothing`` (trained on first use).
    """
    from pathlib import Path

    from ..core.ranking import sweep_topics
    from ..core.evaluate import aggregate, judged_topics
    from ..experiments.regressions import ensure_index
    from ..core.scoring import OMEGA, Scorer, top_k
    from .tcm_sequences import query_collocations
    from ..experiments.smoothing import TRAIN, _model
    from ..core.sources import load_qrels, load_topics
    from ..core.trec import ScoredDoc, topic_query

    rows = []
    for name in collections:
        index = ensure_index(Path(data), name, Path(indexes))
        qrels = load_qrels(Path(data) / name / "qrels.txt")
        judged = judged_topics(qrels)
        topics = [t for t in load_topics(Path(data) / name / "topics.trec") if t.qid in judged]
        model = _model(index, "tcm", k, train or TRAIN)
        row = {"collection": name}
        for label, omega in (("TCM words", 0.0), ("TCM", OMEGA)):
            runs = sweep_topics(index, topics, [(mu, 1.0), (mu, lam)], model=model, progress=False, omega=omega)
            row["QL"] = aggregate(runs[(mu, 1.0)], qrels, ["AP"])["AP"]
            row[label] = aggregate(runs[(mu, lam)], qrels, ["AP"])["AP"]
        run = []
        s = index.stats
        doc_len = np.asarray(s.doc_len, dtype=np.float64)
        for topic in topics:  # QL + OMEGA * sum_c log P_QL(c|d): the collocation term without P_TCM
            text = topic_query(topic, "title")
            scores = Scorer(s, mu, 1.0).score(Scorer(s).query(text, index.analyze(text)))
            for (docs, tf), p_c in zip(*query_collocations(index, model, text)[3:5]):
                v = np.log(mu * p_c / (doc_len + mu))
                v[docs] = np.log((tf + mu * p_c) / (doc_len[docs] + mu))
                scores = scores + OMEGA * v
            run.extend(ScoredDoc(topic.qid, s.docnos[d], float(scores[d])) for d in top_k(scores, 1000))
        row["QL + phrases"] = aggregate(run, qrels, ["AP"])["AP"]
        rows.append(row)
    mean = {"collection": "mean"}
    for key in rows[0]:
        if key != "collection":
            mean[key] = float(np.mean([r[key] for r in rows]))
    return rows + [mean]
