"""A synthetic collection in the layout of TREC's AP88-90 newswire: gzip'd SGML files of about
1,000 documents each, as on the TREC disks, for measuring topicir at AP scale without AP.

Each document looks like AP's::

    <DOC>
    <DOCNO> AP880212-0001 </DOCNO>
    <FILEID>AP-NR-02-12-88 2344EST</FILEID>
    <FIRST>r a AM-Harbor Ministry 02-12 0412</FIRST>
    <SECOND>AM-Harbor Ministry,0412</SECOND>
    <HEAD>Ministry Harbor Reports Accord</HEAD>
    <DATELINE>LISBON (AP) </DATELINE>
    <TEXT>
       The ministry said ...
    </TEXT>
    </DOC>

What the indexer sees (HEAD and TEXT, as for real AP) is English-like text: sentences of
capitalised words ending in punctuation, a share of stopwords between the content words (so
TCM has sequences to find), paragraphs indented as AP's are. Lengths follow a log-normal law
(mean about 450 words before stopping, a long tail). Content words are real English words,
WordNet's single-word lemmas (``index.noun`` etc.), padded with made-up proper names up to the
vocabulary size asked for (AP's long tail is mostly names); without WordNet every word is made
up, and :func:`vocabulary` says so. Word frequencies are Zipfian, and each document mixes a few
latent topics (each a Zipfian distribution over its own words) with a background Zipf, so topic
models have structure to find. Each topic also has set phrases of 2-3 of its top words that its
draws sometimes emit whole (as newswire repeats "prime minister" or "oil spill"), so TCM has
collocations to find, and half the queries hold one.

Every file is generated from its own random stream (``seed``, file number), so a seed gives the
same bytes whatever else is generated, and the gzip header carries no time or name.
"""
from __future__ import annotations

import gzip
import io
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from models.common.atomic import atomic_open

from .wordnet import POS_FILES, wordnet_dir

log = logging.getLogger(__name__)

DOCS_PER_FILE = 1000
# Lucene's English stopwords (the index's analyzer removes them), most frequent first, with
# weights after their rough share of English newswire.
STOPWORDS = ("the of to a and in that for is on it was with as by at be this are from or but "
             "not they an will their there if into no such these then").split()
_STOP_WEIGHTS = np.array([60, 28, 26, 24, 23, 21, 10, 9, 8, 7, 7, 7, 6, 5, 5, 5, 5, 3, 3, 3, 3, 3,
                          2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1][:len(STOPWORDS)], dtype=float)
# Frequent newswire words that Lucene keeps (AP's most frequent terms after stopping)
NEWSWIRE = ("said he his would which has were had have been who its new after year i we two "
            "percent million also government president people first last more than".split())
STOP_SHARE = 0.42          # share of stopword tokens: about 450 words become ~260 after stopping
MEAN_WORDS = 450.0         # words per document (TEXT), before stopping
LENGTH_SIGMA = 0.7         # of the log-normal document length: a long tail
N_LATENT = 200             # latent topics
TOPIC_WORDS = 1500         # words per latent topic
TOPIC_SHARE = 0.6          # share of content tokens drawn from the document's topics
PHRASES_PER_TOPIC = 20     # each topic's set phrases (AP's "prime minister", "oil spill")
PHRASE_POOL = 100          # a phrase's words come from its topic's this-many top words
PHRASE_SHARE = 0.05        # share of a topic's draws that start one of its phrases
QUERY_PHRASE_SHARE = 0.5   # share of the queries that hold one of their topic's phrases
CITIES = ("WASHINGTON", "NEW YORK", "LOS ANGELES", "CHICAGO", "LONDON", "MOSCOW", "TOKYO",
          "PARIS", "BONN, West Germany", "JERUSALEM", "BEIRUT, Lebanon", "MANILA, Philippines",
          "SAN SALVADOR, El Salvador", "JOHANNESBURG, South Africa", "ATLANTA", "BOSTON", "DENVER",
          "MIAMI", "HOUSTON", "SEOUL, South Korea", "BANGKOK, Thailand", "PEKING", "ROME", "MADRID")
_SYLLABLES = ("ba be bi bo bu ka ke ki ko ku la le li lo lu ma me mi mo mu na ne ni no nu ra re ri "
              "ro ru sa se si so su ta te ti to tu va ve vi vo za ze zi zo an en in on ar er or el "
              "al ul ston berg son ley ford ton").split()


@dataclass(frozen=True)
class Vocabulary:
    """Content words, most frequent first, and where they come from."""

    words: list[str]
    n_wordnet: int      # how many of them are WordNet lemmas (the rest are made-up names)
    source: str         # the WordNet directory, or a sentence saying there was none


def wordnet_lemmas(path=None) -> list[str]:
    """WordNet's single-word alphabetic lemmas of three letters or more (``index.*`` files),
    sorted; [] when WordNet is not installed."""
    d = wordnet_dir(path)
    if d is None:
        return []
    out = set()
    for pos in POS_FILES:
        with open(os.path.join(d, "index." + pos), encoding="latin-1") as f:
            for line in f:
                if line.startswith("  "):  # license header
                    continue
                lemma = line.split(" ", 1)[0]
                if len(lemma) >= 3 and lemma.isascii() and lemma.isalpha():
                    out.add(lemma.lower())
    return sorted(out - set(STOPWORDS) - set(NEWSWIRE))


def _made_up_names(n: int, rng: np.random.Generator, taken: set) -> list[str]:
    """``n`` distinct pronounceable names of 2-4 syllables, none in ``taken``."""
    syl = np.array(_SYLLABLES)
    out, seen = [], set(taken)
    while len(out) < n:
        k = rng.integers(2, 5, size=2 * (n - len(out)) + 16)
        parts = rng.integers(0, len(syl), size=(len(k), 4))
        for kk, p in zip(k, parts):
            w = "".join(syl[p[:kk]])
            if w not in seen:
                seen.add(w)
                out.append(w)
                if len(out) == n:
                    break
    return out


def vocabulary(n_terms: int, seed: int, wordnet=None) -> Vocabulary:
    """``n_terms`` content words in frequency-rank order: AP's frequent newswire words, then
    WordNet lemmas in a seeded order, then made-up names (capitalised in text) to fill up."""
    rng = np.random.default_rng([seed, 0xA9])
    lemmas = wordnet_lemmas(wordnet)
    if lemmas:
        source = wordnet_dir(wordnet)
    else:
        source = (f"no WordNet in {wordnet or '/usr/share/wordnet'}: every content word is made up "
                  f"(install wordnet-base for English words)")
        log.warning("%s", source)
    lemmas = [lemmas[i] for i in rng.permutation(len(lemmas))]
    words = list(NEWSWIRE) + lemmas[:max(0, n_terms - len(NEWSWIRE))]
    n_wordnet = len(words) - len(NEWSWIRE)
    words += _made_up_names(max(0, n_terms - len(words)), rng, set(words))
    return Vocabulary(words[:n_terms], n_wordnet, source)


class Generator:
    """Draws AP-layout documents over one vocabulary (see the module docstring)."""

    def __init__(self, n_terms: int = 200_000, seed: int = 0, zipf: float = 1.05, wordnet=None):
        self.seed = seed
        self.vocab = vocabulary(n_terms, seed, wordnet)
        words = self.vocab.words
        n = len(words)
        # Made-up names are proper nouns: capitalised wherever they occur.
        shown = [w if i < len(NEWSWIRE) + self.vocab.n_wordnet else w.capitalize()
                 for i, w in enumerate(words)]
        self.words = np.array(shown, dtype=object)
        self.stop = np.array(STOPWORDS, dtype=object)
        self.stop_cdf = np.cumsum(_STOP_WEIGHTS / _STOP_WEIGHTS.sum())
        rank_weight = 1.0 / (np.arange(n) + 2.7) ** zipf
        self.background_cdf = np.cumsum(rank_weight / rank_weight.sum())
        rng = np.random.default_rng([seed, 0x70])
        # A topic draws its words by sqrt of their background weight (frequent words are
        # shared, mid-frequency ones characterise), then ranks them Zipf-like.
        pick = np.sqrt(rank_weight)
        pick[len(NEWSWIRE) + self.vocab.n_wordnet:] *= 0.1  # topics are mostly about things, not names
        pick /= pick.sum()
        m = min(TOPIC_WORDS, n)
        self.topic_words = np.stack([rng.choice(n, size=m, replace=False, p=pick) for _ in range(N_LATENT)])
        w = 1.0 / (np.arange(m) + 1.0)
        self.topic_cdf = np.cumsum(w / w.sum())
        self.phrases = self._draw_phrases(np.random.default_rng([seed, 0x9A]))

    def _draw_phrases(self, rng) -> np.ndarray:
        """Every topic's set phrases, (N_LATENT, PHRASES_PER_TOPIC, 3) word ids, -1 after the
        last word of a two-word phrase: distinct words of the topic's top PHRASE_POOL."""
        pool = min(PHRASE_POOL, self.topic_words.shape[1])
        out = np.full((N_LATENT, PHRASES_PER_TOPIC, 3), -1, dtype=np.int64)
        for t in range(N_LATENT):
            for j in range(PHRASES_PER_TOPIC):
                n = 2 + int(rng.random() < 0.3)
                out[t, j, :n] = self.topic_words[t, rng.choice(pool, size=n, replace=False)]
        return out

    # -- one file ------------------------------------------------------------------------------

    def file_docs(self, file_no: int, n_docs: int) -> str:
        """The SGML text of file ``file_no`` (its own random stream), ``n_docs`` documents."""
        rng = np.random.default_rng([self.seed, 0xF11E, file_no])
        day = np.datetime64("1988-01-01") + file_no
        yymmdd = str(day).replace("-", "")[2:]
        mm, dd, yy = yymmdd[2:4], yymmdd[4:6], yymmdd[:2]
        mu = np.log(MEAN_WORDS) - LENGTH_SIGMA ** 2 / 2
        lengths = np.clip(np.round(rng.lognormal(mu, LENGTH_SIGMA, size=n_docs)), 20, 20 * MEAN_WORDS).astype(int)
        out = io.StringIO()
        for i in range(n_docs):
            body, head = self._doc_text(rng, int(lengths[i]))
            slug = " ".join(head.split()[:2])
            n_words = f"{int(lengths[i]):04d}"
            hh, mi = rng.integers(0, 24), rng.integers(0, 60)
            out.write(
                f"<DOC>\n<DOCNO> AP{yymmdd}-{i + 1:04d} </DOCNO>\n"
                f"<FILEID>AP-NR-{mm}-{dd}-{yy} {hh:02d}{mi:02d}EST</FILEID>\n"
                f"<FIRST>r a AM-{slug} {mm}-{dd} {n_words}</FIRST>\n"
                f"<SECOND>AM-{slug},{n_words}</SECOND>\n"
                f"<HEAD>{head}</HEAD>\n"
                f"<DATELINE>{CITIES[rng.integers(len(CITIES))]} (AP) </DATELINE>\n"
                f"<TEXT>\n{body}\n</TEXT>\n</DOC>\n")
        return out.getvalue()

    def _doc_text(self, rng: np.random.Generator, n_words: int) -> tuple[str, str]:
        """(TEXT body, HEAD) of one document of ``n_words`` words."""
        n_topics = rng.integers(1, 4)
        topics = rng.choice(N_LATENT, size=n_topics, replace=False)
        mix = rng.dirichlet(np.ones(n_topics))
        content, topic_of = self._content(rng, n_words + 8, topics, mix)
        head_words = content[n_words:n_words + rng.integers(4, 9)]
        tokens = content[:n_words].copy()
        is_stop = rng.random(n_words) < STOP_SHARE
        self._place_phrases(rng, tokens, is_stop, topic_of[:n_words])
        tokens[is_stop] = self.stop[np.searchsorted(self.stop_cdf, rng.random(int(is_stop.sum())))]
        # sentences of 8-40 words: capitalised first word, a period (sometimes ? or !), commas
        ends = np.cumsum(rng.integers(8, 41, size=n_words // 8 + 2))
        ends = ends[ends < n_words].tolist() + [n_words]
        starts = [0] + ends[:-1]
        for s in starts:
            tokens[s] = tokens[s][:1].upper() + tokens[s][1:]
        for e in ends:
            tokens[e - 1] = tokens[e - 1] + (".", ".", ".", ".", ".", ".", ".", "?", "!")[rng.integers(9)]
        for c in rng.integers(0, n_words, size=n_words // 17):
            if not tokens[c].endswith((".", "?", "!", ",")):
                tokens[c] = tokens[c] + ","
        # paragraphs of 1-4 sentences, indented three spaces as in AP
        paras, k = [], 0
        while k < len(starts):
            j = min(len(starts), k + int(rng.integers(1, 5)))
            paras.append("   " + " ".join(tokens[starts[k]:ends[j - 1]]))
            k = j
        head = " ".join(w[:1].upper() + w[1:] for w in head_words)
        return "\n".join(paras), head

    def _place_phrases(self, rng, tokens, is_stop, topic_of) -> None:
        """Where a topic drew a word, start one of its phrases with probability PHRASE_SHARE:
        the phrase's words overwrite ``tokens`` from there, and no stopword falls inside."""
        starts = np.flatnonzero((topic_of >= 0) & (rng.random(len(tokens)) < PHRASE_SHARE))
        picks = rng.integers(PHRASES_PER_TOPIC, size=len(starts))
        free = 0  # phrases do not overlap
        for i, j in zip(starts.tolist(), picks.tolist()):
            if i < free:
                continue
            words = self.phrases[topic_of[i], j]
            words = words[words >= 0][:len(tokens) - i]
            tokens[i:i + len(words)] = self.words[words]
            is_stop[i:i + len(words)] = False
            free = i + len(words)

    def _content(self, rng, n: int, topics, mix) -> tuple[np.ndarray, np.ndarray]:
        """``n`` content words from the document's topics (by ``mix``) or the background, and the
        latent topic of each (-1: background)."""
        from_topic = rng.random(n) < TOPIC_SHARE
        ids = np.searchsorted(self.background_cdf, rng.random(n))
        ids = np.minimum(ids, len(self.words) - 1)
        k = int(from_topic.sum())
        which = topics[np.searchsorted(np.cumsum(mix), rng.random(k) * mix.sum())]
        ranks = np.minimum(np.searchsorted(self.topic_cdf, rng.random(k)), self.topic_words.shape[1] - 1)
        ids[from_topic] = self.topic_words[which, ranks]
        topic_of = np.full(n, -1, dtype=np.int64)
        topic_of[from_topic] = which
        return self.words[ids], topic_of

    def queries(self, n: int, seed: int = 0) -> list[str]:
        """``n`` title queries of 2-4 words, each from one latent topic's top words (as a user
        would type them about that topic); QUERY_PHRASE_SHARE of them start with one of the
        topic's phrases."""
        rng = np.random.default_rng([self.seed, 0x9E, seed])
        out = []
        for _ in range(n):
            t = rng.integers(N_LATENT)
            size = int(rng.integers(2, 5))
            ids = self.topic_words[t, rng.choice(50, size=size, replace=False)]
            if rng.random() < QUERY_PHRASE_SHARE:
                phrase = self.phrases[t, rng.integers(PHRASES_PER_TOPIC)]
                phrase = phrase[phrase >= 0]
                rest = ids[~np.isin(ids, phrase)][:max(0, size - len(phrase))]
                ids = np.concatenate([phrase, rest])
            out.append(" ".join(str(w).lower() for w in self.words[ids]))
        return out


def write_gzip(path: Path, text: str) -> None:
    """``text`` gzip'd into ``path`` with no time or name in the header (same text, same bytes),
    written to a temporary first so an interrupted run leaves no truncated file."""
    with atomic_open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                                                       compresslevel=6) as f:
        f.write(text.encode("utf-8"))


def file_names(n_docs: int, docs_per_file: int = DOCS_PER_FILE) -> list[tuple[str, int]]:
    """(file name, documents in it) of a collection of ``n_docs`` documents: one file a day from
    1988-01-01 on, named as on the TREC disks (``AP880101.gz``)."""
    out = []
    for f in range((n_docs + docs_per_file - 1) // docs_per_file):
        day = str(np.datetime64("1988-01-01") + f).replace("-", "")[2:]
        out.append((f"AP{day}.gz", min(docs_per_file, n_docs - f * docs_per_file)))
    return out


def generate(out, n_docs: int, *, n_terms: int = 200_000, seed: int = 0,
             docs_per_file: int = DOCS_PER_FILE, wordnet=None, progress: bool = True) -> list[Path]:
    """Write a synthetic AP collection of ``n_docs`` documents into directory ``out`` and return
    its files in order. Files already there from the same settings (``.ap_synth.json`` records
    them and each file's document count) are reused, so an interrupted or larger run goes on
    where the last one stopped; a file is written whole or not at all."""
    from tqdm.auto import tqdm

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    settings = dict(n_terms=n_terms, seed=seed, docs_per_file=docs_per_file, generator=2)
    manifest = out / ".ap_synth.json"  # a dot-file: the TREC reader skips it
    have = json.loads(manifest.read_text()) if manifest.exists() else {}
    if have.get("settings") != settings:  # other settings: no file there can be reused
        for p in out.glob("AP*.gz"):
            p.unlink()
        have = {}
    counts = have.get("files", {})
    names = file_names(n_docs, docs_per_file)
    todo = [(i, name, n) for i, (name, n) in enumerate(names)
            if counts.get(name) != n or not (out / name).exists()]
    gen = None
    for i, name, n in tqdm(todo, desc="generating AP-like files", unit=" files", disable=not progress or not todo):
        gen = gen or Generator(n_terms, seed, wordnet=wordnet)
        write_gzip(out / name, gen.file_docs(i, n))
        counts[name] = n
        # recorded after each file: an interrupted run keeps what it wrote
        manifest.write_text(json.dumps(dict(settings=settings, files=counts)) + "\n")
    return [out / name for name, _ in names]
