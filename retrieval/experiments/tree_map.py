"""MAP of QL, LDA smoothing and tree-LDA smoothing (WordNet prior) on the shared collections at
one K and lam, and a synonym example, one command:

    topicir reproduce tree-lda-map --data ../shared/data --collections med cran --k 50 --lam 0.7

Both models are trained through the registry (``train_model``, kept under ``<index>/models/`` and
reused) with the same schedule (chains, sweeps, burn-in, lag, seed 0); tree-LDA's synsets come
from WordNet through the index's analyzer (``retrieval/adapters/tree_lda.py``). The example shows,
for the first collection, the two topics that send most tokens through synset subtrees with the
synsets they use, and a judged query with a relevant document that holds a WordNet synonym of a
query term but not the term itself, with that document's rank under QL, LDA and tree-LDA.
"""
import logging
from pathlib import Path

import numpy as np

from ..adapters.tree_lda import synset_rows
from models.registry import model_class

from ..core.evaluate import judged_topics
from ..core.modelfiles import default_model_path, load_model
from ..core.ranking import sweep_topics
from ..core.sources import load_qrels, load_topics
from ..core.tables import Table
from .regressions import COLLECTIONS, ensure_index
from .smoothing import TRAIN, _model, collection_grid

log = logging.getLogger(__name__)


def empty_wordnet(indexes) -> str:
    """A WordNet directory without synsets: tree-LDA on it is the control (no prior tree)."""
    d = Path(indexes) / "wordnet-none"
    d.mkdir(parents=True, exist_ok=True)
    for pos in ("noun", "verb", "adj", "adv"):
        (d / f"data.{pos}").write_text("")
    return str(d.resolve())


def map_table(data, collections, indexes, k, lam, mu, train, control=False):
    """One row per collection: QL, LDA and tree-LDA MAP at (k, lam) (and, with ``control``,
    tree-LDA without synsets: the same sampler and initialisation, no WordNet), and the models."""
    rows, models = [], {}
    runs = [("lda", "LDA", train), ("tree-lda", "TREE-LDA", train)]
    if control:
        runs.append(("tree-lda", "TREE-LDA no synsets", dict(train, wordnet=empty_wordnet(indexes))))
    for name in collections:
        row = {"collection": name}
        for kind, label, params in runs:
            ql, grid = collection_grid(Path(data), name, Path(indexes), ks=(k,), lams=(lam,), mu=mu,
                                       kind=kind, train=params)
            row["QL"] = ql
            row[f"{label} K{k} lam{lam:g}"] = grid[(k, lam)]
        index = ensure_index(Path(data), name, Path(indexes))
        models[name] = (index, _trained(index, "lda", k, train), _trained(index, "tree-lda", k, train))
        row["synsets"] = len(models[name][2].tree_.synsets)
        rows.append(row)
    mean = {"collection": "mean"}
    for key in rows[0]:
        if key != "collection":
            mean[key] = float(np.mean([r[key] for r in rows])) if isinstance(rows[0][key], float) else ""
    return rows + [mean], models


def _trained(index, kind, k, train):
    """The model ``collection_grid`` just trained or reused (its default file), loaded."""
    path = default_model_path(index, kind, dict(train, **model_class(kind).size_params(k)))
    return load_model(path, index) if path.exists() else _model(index, kind, k, train)


def _rank(run, docno):
    for i, r in enumerate(run):
        if r.docno == docno:
            return i + 1
    return None


def synonym_example(data, name, index, lda, tree, lam, mu, n_topics=2) -> str:
    """Two topics' synsets, and a query whose relevant document uses a synonym of a query term."""
    terms, stats = index.stats.terms, index.stats
    out = []
    usage = [model_sum for model_sum in
             (float(tree.topic_synsets(k, top=len(tree.tree_.synsets))[1].sum()) for k in range(tree.n_topics))]
    for k in np.argsort(-np.array(usage), kind="stable")[:n_topics]:
        words = " ".join(terms[w] for w in tree.topic_words(int(k), top=8)[0])
        out.append(f"{name} topic {int(k)}: {words}")
        out += [f"  synset {row}" for row in synset_rows(tree, terms, int(k), top=4)]
    partners = {}
    for s in tree.tree_.synsets:
        for w in s:
            partners.setdefault(w, set()).update(x for x in s if x != w)
    qrels = load_qrels(Path(data) / name / "qrels.txt")
    judged = judged_topics(qrels)
    relevant = {}
    for q in qrels:
        if q.rel > 0:
            relevant.setdefault(q.qid, set()).add(q.docno)
    vocab = stats.term_index
    for topic in load_topics(Path(data) / name / "topics.trec"):
        if topic.qid not in judged:
            continue
        q_ids = [vocab[t] for t in index.analyze(topic.title) if t in vocab]
        for q in q_ids:
            has_q = {stats.docnos[d] for d in stats.postings(q)[0]}
            for s in sorted(partners.get(q, set()) - set(q_ids)):
                hits = sorted({stats.docnos[d] for d in stats.postings(s)[0]} & relevant.get(topic.qid, set()) - has_q)
                if not hits:
                    continue
                doc = hits[0]
                runs = {}
                for label, model, l in (("QL", None, 1.0), ("LDA", lda, lam), ("tree-LDA", tree, lam)):
                    runs[label] = _rank(sweep_topics(index, [topic], [(mu, l)], model=model, progress=False)[(mu, l)], doc)
                ranks = ", ".join(f"{k} {v if v else '>1000'}" for k, v in runs.items())
                out.append(f"query {topic.qid} {topic.title!r}: relevant {doc} has {terms[s]!r} "
                           f"(a WordNet synonym of {terms[q]!r}) but not {terms[q]!r}; its rank: {ranks}")
                return "\n".join(out)
    out.append(f"no judged query of {name} has a relevant document with a synonym but not the term")
    return "\n".join(out)


def run(*, data="../shared/data", indexes="indexes", collections=COLLECTIONS, k: int = 50,
        lam: float = 0.7, mu: float = 1000.0, chains: int = TRAIN["n_chains"], iterations: int = TRAIN["n_iter"],
        burn_in: int = TRAIN["burn_in"], sample_every: int = TRAIN["sample_every"], example: bool = True,
        control: bool = False) -> list[Table]:
    """MAP of QL, LDA and tree-LDA smoothing (``control``: also tree-LDA without synsets) and,
    with ``example``, the synonym example of the first collection."""
    train = dict(TRAIN, n_chains=chains, n_iter=iterations, burn_in=burn_in, sample_every=sample_every)
    rows, models = map_table(Path(data), list(collections), Path(indexes), k, lam, mu, train, control)
    tables = [Table(f"MAP: QL vs LDA vs tree-LDA smoothing (title queries, mu={mu:g}, K={k}, lam={lam:g}, "
                    f"{chains} chains, {iterations} sweeps, burn-in {burn_in}, a sample every {sample_every})", rows)]
    if example:
        name = collections[0]
        tables.append(Table(f"Synonyms at work on {name}", [],
                            notes=synonym_example(Path(data), name, *models[name], lam, mu).splitlines()))
    return tables
