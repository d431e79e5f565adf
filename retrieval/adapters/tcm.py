"""Retrieval side of the Topical Collocation Model: training splits, query collocations, views.

- ``training_inputs``: where collocations must stop (stopwords, punctuation), from the index
  (:mod:`retrieval.adapters.tcm_sequences`); ``fold_in_inputs``: the same for documents added
  to the index after training.
- ``query_extra``: the model's segmentation of a query; every multi-word collocation c adds
  ``omega log(lam P_QL(c|d) + (1 - lam) P_TCM(c|d))`` to the score. ``batch_tables``: a
  batch's P_TCM tables of its terms and collocations in one pass over the documents.
- Views (``topicir tcm-view``, the console, reports): for every topic (largest first), its top
  collocations by P(c|t) and by smoothed P(t|c) with a pseudo-count of 5 (how the paper builds
  its word-intrusion lists), and the most frequent multi-word collocations of the collection.
  Terms are shown as the index analysed them (Porter stems).

    topicir tcm-view --index indexes/cran --model indexes/cran/models/tcm-k100-c3-i100-s0-99776a7e.npz
"""
from __future__ import annotations

from functools import partial

PSEUDO = 5.0

# numpy, numba and the ranking modules are imported where used, so that the `tcm-view` command's
# start (and its --help) loads none of them.


def _show(model, terms, type_id) -> str:
    return " ".join(terms[w] for w in model.collocation_terms(type_id))


def topic_order(model, chain: int = 0) -> np.ndarray:
    """Topics by their mean number of collocations over the kept samples of ``chain``, largest first."""
    import numpy as np

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


# -- hooks (see retrieval.adapters) -----------------------------------------------------------


def training_inputs(index, progress: bool = True) -> dict:
    from .tcm_sequences import index_splits

    return {"split": index_splits(index, progress=progress)}


def fold_in_inputs(index, model, n_docs: int, to_model) -> dict:
    """The split flags of the documents of ``index`` after its first ``n_docs`` (those added since
    the model was trained), over the tokens the model knows (``to_model``: the model's term id
    of every index term, -1 for terms it never saw): the index's flags, and a split before every
    left-out term, so that no collocation joins the terms on either side of it."""
    import numpy as np

    from .tcm_sequences import index_splits, known_splits

    s = index.stats
    lo = int(s.doc_ptr[n_docs])
    split = index_splits(index, progress=False)[lo:]
    known = np.asarray(to_model)[np.asarray(s.term_ids[lo:], dtype=np.int64)] >= 0
    return {"split": known_splits(split, known)}


def _p_c_d(model, term_ids, seg_ptr, per_sample: bool):
    """P_TCM(c|d) of the collocations ``term_ids[seg_ptr[i]:seg_ptr[i + 1]]`` (index term ids)."""
    import numpy as np

    to_model = getattr(model, "to_model", None)
    if to_model is not None:  # a grown index: the model's documents, then the folded-in ones
        if per_sample:
            return model.p_w_d_per_sample(term_ids)  # refused, with the reason
        ids = to_model[term_ids]
        return np.vstack([model.model.p_c_d(ids, seg_ptr), model.folded.p_c_d(ids, seg_ptr)])
    if per_sample:
        return model.p_c_d_per_sample(term_ids, seg_ptr)
    return model.p_c_d(term_ids, seg_ptr)


def query_extra(index, model, text: str, query) -> QueryExtra:
    from ..core.ranking import QueryExtra
    from ..core.scoring import OMEGA
    from .tcm_sequences import query_collocations

    col = query_collocations(index, model, text)
    return QueryExtra(col.terms, col.postings, col.p_c, OMEGA, partial(_p_c_d, model, col.term_ids, col.seg_ptr),
                      parts=(col.term_ids, col.seg_ptr))


def batch_tables(model, term_ids, extras) -> tuple:
    """P_TCM(w|d) of ``term_ids`` and the P_TCM(c|d) tables of many queries' collocations
    (``query_extra``'s ``parts``) from one pass over the documents (a term is a one-word
    collocation): ((n_docs, n_terms), [each query's (n_docs, n_collocations)])."""
    import numpy as np

    if getattr(model, "to_model", None) is not None:  # a grown index: model and fold-in apart
        return model.p_w_d(term_ids), [e.p_tm(False) for e in extras]
    ids = np.concatenate([term_ids] + [e.parts[0] for e in extras])
    lens = np.concatenate([np.ones(len(term_ids), np.int64)] + [np.diff(e.parts[1]) for e in extras])
    table = model.p_c_d(ids, np.concatenate([[0], np.cumsum(lens)]))
    bounds = len(term_ids) + np.cumsum([0] + [len(e.parts[1]) - 1 for e in extras])
    # each query's collocations copied (in the table's column-major order): no view keeps the
    # batch's table alive while the next batch computes its own
    return table[:, :len(term_ids)], [table[:, a:b].copy(order="K") for a, b in zip(bounds[:-1], bounds[1:])]


def topic_lines(model, terms, topic: int, top: int = 10) -> list[str]:
    row = collocation_rows(model, terms, topics=[topic], top=top)[0]
    return ["; ".join(c for c, _, _ in row["p_c_t"])]


def report_section(model, terms) -> dict:
    """Collocations per topic by P(c|t) and smoothed P(t|c), as in Zhao et al."""
    return {"title": "Collocations", "text": view_text(collocation_rows(model, terms), phrase_rows(model, terms))}


def add_commands(sub) -> None:
    s = sub.add_parser("tcm-view", help="TCM collocations: top per topic by P(c|t) and smoothed P(t|c)")
    s.add_argument("--index", required=True)
    s.add_argument("--model", required=True, help="a TCM model file (topicir train tcm)")
    s.add_argument("--chain", type=int, default=0)
    s.add_argument("--topics", type=int, default=10, help="topics shown (largest first)")
    s.add_argument("--topic-ids", type=lambda t: [int(x) for x in t.split(",")], help="these topics instead")
    s.add_argument("--top", type=int, default=10, help="collocations per topic and list")
    s.add_argument("--min-len", type=int, default=1, help="shortest collocation listed (2: phrases only)")
    s.add_argument("--phrases", type=int, default=30, help="most frequent multi-word collocations shown first")
    s.set_defaults(func=_cmd_view)


def _cmd_view(args) -> int:
    from ..core.index import Index
    from ..core.modelfiles import load_model

    index = Index(args.index)
    model = load_model(args.model, index, kind="tcm")
    terms = index.stats.terms
    rows = collocation_rows(model, terms, topics=args.topic_ids, n_topics=args.topics, top=args.top,
                            chain=args.chain, min_len=args.min_len)
    print(view_text(rows, phrase_rows(model, terms, top=args.phrases, chain=args.chain) if args.phrases else None))
    return 0
