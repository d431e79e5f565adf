"""MAP of QL, LDA smoothing and tree-LDA smoothing (WordNet prior) on the shared collections at
one K and lam, and a synonym example, one command:

    python -m retrieval.experiments.tree_map --data ../shared/data --collections med cran --k 50 --lam 0.7

Both models are trained through the registry (``train_model``, kept under ``<index>/models/`` and
reused) with the same schedule (chains, sweeps, burn-in, lag, seed 0); tree-LDA's synsets come
from WordNet through the index's analyzer (``retrieval/adapters/tree_lda.py``). The example shows,
for the first collection, the two topics that send most tokens through synset subtrees with the
synsets they use, and a judged query with a relevant document that holds a WordNet synonym of a
query term but not the term itself, with that document's rank under QL, LDA and tree-LDA.
"""
import argparse
import logging
from pathlib import Path

import numpy as np

from ..adapters.tree_lda import synset_rows
from models.registry import model_class

from ..core.evaluate import judged_topics
from ..core.modelfiles import default_model_path, load_model
from ..core.ranking import sweep_topics
from ..core.sources import load_qrels, load_topics
from .compare import format_table
from .regressions import ensure_index
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


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m retrieval.experiments.tree_map",
                                description=__doc__.split("\n")[0])
    p.add_argument("--data", default="../shared/data", type=Path)
    p.add_argument("--indexes", default="indexes", type=Path)
    p.add_argument("--collections", nargs="+", default=["med", "cran", "cisi", "cacm"])
    p.add_argument("--k", type=int, default=50)
    p.add_argument("--lam", type=float, default=0.7)
    p.add_argument("--mu", type=float, default=1000.0)
    p.add_argument("--chains", type=int, default=TRAIN["n_chains"])
    p.add_argument("--iterations", type=int, default=TRAIN["n_iter"])
    p.add_argument("--burn-in", type=int, default=TRAIN["burn_in"])
    p.add_argument("--sample-every", type=int, default=TRAIN["sample_every"])
    p.add_argument("--no-example", action="store_true", help="skip the synonym example")
    p.add_argument("--control", action="store_true", help="also tree-LDA without synsets (no WordNet)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    train = dict(TRAIN, n_chains=args.chains, n_iter=args.iterations, burn_in=args.burn_in,
                 sample_every=args.sample_every)
    rows, models = map_table(args.data, args.collections, args.indexes, args.k, args.lam, args.mu, train,
                             args.control)
    print(format_table(rows, title=f"MAP: QL vs LDA vs tree-LDA smoothing (title queries, mu={args.mu:g}, "
                                   f"K={args.k}, lam={args.lam:g}, {args.chains} chains, {args.iterations} "
                                   f"sweeps, burn-in {args.burn_in}, a sample every {args.sample_every})"))
    if not args.no_example:
        name = args.collections[0]
        print()
        print(synonym_example(args.data, name, *models[name], args.lam, args.mu))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
