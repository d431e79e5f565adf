"""20 Newsgroups (bydate) straight from its tarball, for the LDA benchmark.

``read_newsgroups`` yields :class:`Post` records; ``newsgroups_corpus`` turns them into the
integer corpus both samplers of ``topicir bench lda`` train on. Tokenisation (kept simple on
purpose, and identical for topicir and tomotopy):

1. bytes are decoded as latin-1; the header (everything before the first blank line) is dropped;
2. tokens are the matches of ``[a-z][a-z0-9]+`` in the lowercased text;
3. the English stopword list below (NLTK's 179 words) is removed;
4. terms with document frequency < 2 are dropped; term ids are assigned in order of first
   occurrence; documents left empty are kept (they hold no tokens).
"""
import re
import tarfile
from typing import NamedTuple

import numpy as np

from models.common.corpus import make_corpus

TOKEN_RE = re.compile(r"[a-z][a-z0-9]+")
STOPWORDS = frozenset("""
i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself
yourselves he him his himself she she's her hers herself it it's its itself they them their
theirs themselves what which who whom this that that'll these those am is are was were be been
being have has had having do does did doing a an the and but if or because as until while of at
by for with about against between into through during before after above below to from up down
in out on off over under again further then once here there when where why how all any both each
few more most other some such no nor not only own same so than too very s t can will just don
don't should should've now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn
doesn't hadn hadn't hasn hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't needn
needn't shan shan't shouldn shouldn't wasn wasn't weren weren't won won't wouldn wouldn't
""".split())


class Post(NamedTuple):
    group: str   # e.g. "sci.space"
    split: str   # "train" or "test"
    text: str    # body, header removed


def read_newsgroups(path):
    """Yield every post of the 20news-bydate tarball at ``path`` in archive order."""
    with tarfile.open(path, "r:*") as tar:
        for member in tar:
            if not member.isfile():
                continue
            parts = member.name.split("/")
            if len(parts) < 3 or not parts[-3].startswith("20news-bydate-"):
                continue
            split = parts[-3].rsplit("-", 1)[-1]
            raw = tar.extractfile(member).read().decode("latin-1")
            head, sep, body = raw.partition("\n\n")
            yield Post(parts[-2], split, body if sep else "")


def tokenize(text):
    return [t for t in TOKEN_RE.findall(text.lower()) if t not in STOPWORDS]


def newsgroups_corpus(path, min_df=2):
    """Tokenise all posts (train and test) into a Corpus; returns (corpus, vocab list, posts)."""
    posts = list(read_newsgroups(path))
    docs = [tokenize(p.text) for p in posts]
    df = {}
    for toks in docs:
        for t in set(toks):
            df[t] = df.get(t, 0) + 1
    vocab, ids = [], {}
    lens, flat = [], []
    for toks in docs:
        n = 0
        for t in toks:
            if df[t] < min_df:
                continue
            i = ids.get(t)
            if i is None:
                i = ids[t] = len(vocab)
                vocab.append(t)
            flat.append(i)
            n += 1
        lens.append(n)
    doc_ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    corpus = make_corpus(doc_ptr, np.array(flat, dtype=np.int32), n_terms=len(vocab),
                         fingerprint=f"20news-bydate:min_df={min_df}")
    return corpus, vocab, posts


def newsgroups_top_words_corpus(path, n_words=2000, split="train"):
    """The AVITM-style 20 Newsgroups corpus: the posts of ``split`` ("train", "test" or None for
    both), tokenised as above, restricted to the ``n_words`` most frequent terms (collection
    frequency after stopword removal; ties by term) with term ids in that order, and documents
    left without tokens dropped (as AVITM drops them).

    Returns (corpus, vocab list, the posts kept).
    """
    if split not in ("train", "test", None):
        raise ValueError(f"split must be 'train', 'test' or None, got {split!r}")
    posts = [p for p in read_newsgroups(path) if split is None or p.split == split]
    docs = [tokenize(p.text) for p in posts]
    cf = {}
    for toks in docs:
        for t in toks:
            cf[t] = cf.get(t, 0) + 1
    vocab = [t for t, _ in sorted(cf.items(), key=lambda kv: (-kv[1], kv[0]))[:n_words]]
    ids = {t: i for i, t in enumerate(vocab)}
    kept, lens, flat = [], [], []
    for post, toks in zip(posts, docs):
        row = [ids[t] for t in toks if t in ids]
        if row:
            kept.append(post)
            lens.append(len(row))
            flat.extend(row)
    doc_ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    corpus = make_corpus(doc_ptr, np.array(flat, dtype=np.int32), n_terms=len(vocab),
                         fingerprint=f"20news-bydate:{split or 'all'}:top{n_words}")
    return corpus, vocab, kept
