"""Retrieval side of tree-based LDA: WordNet synsets as index terms, and topic views that show
the synsets a topic uses.

- ``training_inputs``: every WordNet 3.0 synset (read from ``data.{noun,verb,adj,adv}``, see
  :mod:`retrieval.datasets.wordnet`) mapped to index terms with the index's own analyzer, so
  "hormone" and "hormones" meet at the term "hormon"; a lemma that analyses to anything but one
  term (multi-word lemmas, stopwords, hyphenated words) is left out, and synsets with fewer than
  two distinct index terms are dropped. The directory is the model's ``wordnet`` parameter
  (``topicir train tree-lda --wordnet DIR``), else $WORDNET_DIR, else /usr/share/wordnet.
- ``topic_lines`` / ``report_section``: a topic's top words, then the synset subtrees it sends
  most tokens through (mean count over the kept samples of chain 0), each as its words.
"""
from __future__ import annotations

import logging

import numpy as np

from ..datasets.wordnet import read_synsets, synsets_as_terms, wordnet_dir

log = logging.getLogger(__name__)

# Between lemmas analysed in one call: stays one term of its own whatever surrounds it.
_SEP = "qqzzsepzzqq"
_CHUNK = 2000


def lemma_terms(index, lemmas) -> dict[str, int]:
    """lemma -> index term id, for the lemmas the index's analyzer turns into exactly one term
    of the index's vocabulary. Lemmas are analysed in chunks (one analyzer call per chunk,
    a separator term between lemmas), which gives what one call per lemma gives."""
    vocab = index.stats.term_index
    sep = index.analyze(_SEP)
    if len(sep) != 1:
        raise RuntimeError(f"the separator {_SEP!r} analyses to {sep!r}")
    lemmas = [w for w in lemmas if w and not any(c.isspace() for c in w)]
    out = {}
    for a in range(0, len(lemmas), _CHUNK):
        part = lemmas[a:a + _CHUNK]
        terms = index.analyze(f" {_SEP} ".join(part))
        groups, cur = [], []
        for t in terms:
            if t == sep[0]:
                groups.append(cur)
                cur = []
            else:
                cur.append(t)
        groups.append(cur)
        if len(groups) != len(part):  # a lemma swallowed a separator: fall back to one by one
            groups = [index.analyze(w) for w in part]
        for w, g in zip(part, groups):
            if len(g) == 1 and g[0] in vocab:
                out[w] = vocab[g[0]]
    return out


def index_synsets(index, directory=None) -> list[tuple[int, ...]]:
    """WordNet's synsets as tuples of the index's term ids (at least two distinct terms each)."""
    synsets = read_synsets(directory)
    lemmas = sorted({w for s in synsets for w in s if "_" not in w})
    term_of = lemma_terms(index, lemmas).get
    out = synsets_as_terms(synsets, term_of)
    log.info("WordNet %s: %d synsets read, %d with at least two distinct index terms of %s kept",
             wordnet_dir(directory), len(synsets), len(out), index.name)
    return out


def synset_rows(model, terms, topic: int, top: int = 5, words: int = 6, chain: int = 0) -> list[str]:
    """The synsets ``topic`` uses most, as "(count) word word ..." strings."""
    ids, counts = model.topic_synsets(topic, top=top, chain=chain)
    syn = model.tree_.synsets
    return [f"({c:.0f}) " + " ".join(terms[w] for w in syn[i][:words])
            + (" ..." if len(syn[i]) > words else "") for i, c in zip(ids, counts)]


# -- hooks (see retrieval.adapters) -----------------------------------------------------------


def training_inputs(index, progress: bool = True, model=None) -> dict:
    return {"synsets": index_synsets(index, getattr(model, "wordnet", None))}


def topic_lines(model, terms, topic: int, top: int = 10) -> list[str]:
    words = " ".join(terms[w] for w in model.topic_words(topic, top=top)[0])
    syn = synset_rows(model, terms, topic)
    return [words] + (["synsets: " + "; ".join(syn)] if syn else [])


def report_section(model, terms) -> dict:
    """Every topic (most tokens first) with its top words and the synsets it uses."""
    css = list(model._cs_of_chain(0))
    size = np.mean([model.topic_mass(cs) for cs in css], axis=0)
    out = [f"{len(model.tree_.synsets)} synset subtrees in the prior tree "
           f"(beta_root={model.beta_root:g}, beta_synset={model.beta_synset:g}, merge={model.merge})."]
    for k in np.lexsort((np.arange(model.n_topics), -size))[:20]:
        lines = topic_lines(model, terms, int(k))
        out.append(f"topic {int(k)}: {lines[0]}")
        out += [f"  {line}" for line in lines[1:]]
    return {"title": "Topics and the synsets they use", "text": "\n".join(out)}
