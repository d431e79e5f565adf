"""TREC file formats: document collections, topics, qrels and runs.

This is the only module that parses or writes TREC files. Each format maps to a small
NamedTuple (`Doc`, `Topic`, `Qrel`, `ScoredDoc`). Every reader takes a path (str or
`pathlib.Path`, gzip detected from the bytes), an open file, or literal text: a str that
is empty or contains a newline or a "<" is read as text, any other str is a path
(cf. ``ir_measures/util.py``).

Bad input raises `TrecFormatError` as ``path:LINE: problem, quoting the bad value. What to do.``
Recoverable surprises are warnings of category `TrecFormatWarning`.
"""

import math
import re
import warnings
from collections import defaultdict
from typing import Iterable, Iterator, NamedTuple

# the collection reader and the shared helpers live in their own modules; import them from here
from .trec_docs import DEFAULT_TEXT_TAGS, DEFAULT_TITLE_TAGS, Doc, collection_files, read_collection
from .trec_io import GZIP_ERRORS, TAG, TrecFormatError, TrecFormatWarning, clean, norm_qid, open_text, quote

__all__ = [
    "GZIP_ERRORS",
    "collection_files",
    "DEFAULT_TEXT_TAGS",
    "DEFAULT_TITLE_TAGS",
    "TOPIC_FIELDS",
    "Doc",
    "Qrel",
    "ScoredDoc",
    "Topic",
    "TrecFormatError",
    "TrecFormatWarning",
    "read_collection",
    "read_qrels",
    "read_run",
    "read_topics",
    "topic_query",
    "write_run",
]

TOPIC_FIELDS = ("title", "desc", "narr", "title+desc")
_TOP = re.compile(r"<top>(.*?)(?:</top>|(?=<top>)|\Z)", re.IGNORECASE | re.DOTALL)
_TOPIC_PREFIX = {
    "num": re.compile(r"^\s*Number\s*:", re.IGNORECASE),
    "title": re.compile(r"^\s*Topic\s*:", re.IGNORECASE),
    "desc": re.compile(r"^\s*Description\s*:", re.IGNORECASE),
    "narr": re.compile(r"^\s*Narrative\s*:", re.IGNORECASE),
}


class Topic(NamedTuple):
    qid: str  # leading zeros of numeric ids stripped: "051" -> "51"
    title: str
    desc: str
    narr: str


class Qrel(NamedTuple):
    qid: str
    docno: str
    rel: int  # graded: may be 0, 1..4, or negative


class ScoredDoc(NamedTuple):
    qid: str
    docno: str
    score: float


# --- topics ---------------------------------------------------------------------------------


def read_topics(source) -> list[Topic]:
    """Read TREC topics: ``<top>`` blocks (TREC-1/2 or Robust04 layout) or ``qid<TAB>query`` lines.

    In ``<top>`` blocks a field runs to the next tag, so closing tags are optional; the
    "Number:", "Topic:", "Description:" and "Narrative:" prefixes are dropped and whitespace
    is collapsed. In the TSV form the query is the title and desc and narr are "".

    Returns
    -------
    list of Topic
        In file order, qids normalized ("051" -> "51").

    Raises
    ------
    TrecFormatError
        When nothing in the file is a topic, a topic has no number or title, or a qid repeats.
    """
    with open_text(source) as (name, lines):
        text = "".join(lines)
    if re.search(r"<top>", text, re.IGNORECASE):
        records = _sgml_topics(text, name)
    elif "\t" in text:
        records = _tsv_topics(text, name)
    else:
        raise TrecFormatError(
            "no <top> blocks and no qid<TAB>text lines; is this a topics file?", name
        )
    topics = []
    first_line: dict[str, int] = {}
    for topic, line in records:
        if not topic.title:
            raise TrecFormatError(
                f"topic {topic.qid!r} has no title. Every topic needs a title (the query).",
                name,
                line,
            )
        if topic.qid in first_line:
            raise TrecFormatError(
                f"duplicate topic {topic.qid!r}; it was first defined at line "
                f"{first_line[topic.qid]}. Topic ids must be unique.",
                name,
                line,
            )
        first_line[topic.qid] = line
        topics.append(topic)
    return topics


def _sgml_topics(text: str, name: str) -> Iterator[tuple[Topic, int]]:
    for top in _TOP.finditer(text):
        line = text.count("\n", 0, top.start()) + 1
        block = top.group(1)
        tags = [tag for tag in TAG.finditer(block) if tag.group(2) is not None]
        fields: dict[str, str] = {}
        for tag, next_tag in zip(tags, tags[1:] + [None]):
            key = tag.group(2).lower()
            if tag.group(1) or key not in _TOPIC_PREFIX or key in fields:
                continue
            value = block[tag.end() : next_tag.start() if next_tag else len(block)]
            value = _TOPIC_PREFIX[key].sub("", value, count=1)
            fields[key] = " ".join(clean(value).split())
        qid = fields.get("num", "")
        if not qid or len(qid.split()) > 1:
            raise TrecFormatError(
                f"topic has no usable <num>: {qid!r}. Write <num> Number: 51.", name, line
            )
        topic = Topic(norm_qid(qid), fields.get("title", ""), fields.get("desc", ""),
                      fields.get("narr", ""))
        yield topic, line


def _tsv_topics(text: str, name: str) -> Iterator[tuple[Topic, int]]:
    for line, row in enumerate(text.split("\n"), 1):
        if not row.strip():
            continue
        qid, tab, query = row.partition("\t")
        if not tab or not qid.strip():
            raise TrecFormatError(
                f"expected 'qid<TAB>query', got {quote(row)}. Separate id and query by a tab.",
                name,
                line,
            )
        if len(qid.split()) != 1:  # a run could not name it (binary data, a vertical tab)
            raise TrecFormatError(f"topic id {quote(qid.strip())} holds whitespace; is this a topics file?",
                                  name, line)
        yield Topic(norm_qid(qid.strip()), " ".join(query.split()), "", ""), line


def topic_query(topic: Topic, field: str = "title") -> str:
    """The query text of a topic: one of `TOPIC_FIELDS` ("title+desc" joins both by a space)."""
    if field not in TOPIC_FIELDS:
        raise ValueError(f"field must be one of {TOPIC_FIELDS}, got {field!r}")
    if field == "title+desc":
        return " ".join(part for part in (topic.title, topic.desc) if part)
    return getattr(topic, field)


# --- qrels and runs -------------------------------------------------------------------------


def read_qrels(source) -> list[Qrel]:
    """Read TREC qrels, ``qid iter docno rel`` per line.

    Returns
    -------
    list of Qrel
        In file order, qids normalized. A repeated (qid, docno) keeps its first place and its
        last relevance, with one warning per file.
    """
    qrels: dict[tuple[str, str], Qrel] = {}
    first_line: dict[tuple[str, str], int] = {}
    n_repeated, example = 0, ""
    with open_text(source) as (name, lines):
        for lineno, line in enumerate(lines, 1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != 4:
                hint = {3: 'Is the "iter" column missing?', 6: "Is this a run file?"}
                raise TrecFormatError(
                    f'expected 4 fields "qid iter docno rel", got {len(fields)}: '
                    f"{quote(line, 80)}. {hint.get(len(fields), 'Is this a qrels file?')}",
                    name,
                    lineno,
                )
            qid, _, docno, rel = fields
            try:
                rel = int(rel)
            except ValueError:
                raise TrecFormatError(
                    f"relevance must be an integer, got {rel!r} in {quote(line, 80)}.",
                    name,
                    lineno,
                ) from None
            key = (norm_qid(qid), docno)
            if key in qrels:
                n_repeated += 1
                example = example or (
                    f"line {lineno} judges topic {key[0]!r}, doc {docno!r} again "
                    f"(first at line {first_line[key]})"
                )
            else:
                first_line[key] = lineno
            qrels[key] = Qrel(key[0], docno, rel)
    if n_repeated:
        warnings.warn(
            f"{name}: {n_repeated} repeated judgment{'s' if n_repeated > 1 else ''}, e.g. "
            f"{example}; the last one wins.",
            TrecFormatWarning,
        )
    return list(qrels.values())


def read_run(source) -> list[ScoredDoc]:
    """Read a TREC run, ``qid Q0 docno rank score tag`` per line; file order, qids normalized.

    A document listed twice for one topic is refused (TrecFormatError naming both lines), as
    trec_eval refuses it: its rank and score would be ambiguous.
    """
    run = []
    first_line: dict[tuple[str, str], int] = {}
    with open_text(source) as (name, lines):
        for lineno, line in enumerate(lines, 1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != 6:
                hint = "Is this a qrels file?" if len(fields) == 4 else "Is this a run file?"
                raise TrecFormatError(
                    f'expected 6 fields "qid Q0 docno rank score tag", got {len(fields)}: '
                    f"{quote(line, 80)}. {hint}",
                    name,
                    lineno,
                )
            qid, _, docno, rank, score, _ = fields
            try:
                int(rank)
                score_value = float(score)
            except ValueError:
                raise TrecFormatError(
                    f"rank must be an integer and score a number, got rank {rank!r}, "
                    f"score {score!r}.",
                    name,
                    lineno,
                ) from None
            if not math.isfinite(score_value):
                raise TrecFormatError(
                    f"score must be a finite number, got {score!r}: a NaN or infinite score "
                    f"makes the ranking undefined. Fix the system that wrote {quote(line, 80)}.",
                    name,
                    lineno,
                )
            key = (norm_qid(qid), docno)
            if key in first_line:
                raise TrecFormatError(
                    f"topic {key[0]!r} lists document {docno!r} again (first at line "
                    f"{first_line[key]}); a run ranks each document once per topic. Remove "
                    f"the duplicates from the system that wrote it.",
                    name,
                    lineno,
                )
            first_line[key] = lineno
            run.append(ScoredDoc(key[0], docno, score_value))
    return run


def _run_lines(run: Iterable[ScoredDoc], tag: str, depth: int | None) -> list[str]:
    by_qid: dict[str, dict[str, float]] = {}
    checked: set[str] = set()  # qids and docnos already found well-formed (both one word)
    isfinite = math.isfinite
    for qid, docno, score in run:
        score = float(score)  # numpy scalars repr as "np.float64(...)"
        if not isfinite(score):
            raise ValueError(f"score of topic {qid!r}, doc {docno!r} is {score!r}; rankings need "
                             f"finite numbers")
        for what, value in (("qid", qid), ("docno", docno)):
            if value not in checked:
                if not value or len(value.split()) != 1 or value.strip() != value:
                    raise ValueError(f"{what} must be non-empty without whitespace, got {value!r}")
                checked.add(value)
        docs = by_qid.get(qid)
        if docs is None:
            docs = by_qid[qid] = {}
        if docno in docs:  # read_run and trec_eval refuse such a run
            raise ValueError(f"topic {qid!r} ranks document {docno!r} twice; a run ranks each "
                             f"document once per topic")
        docs[docno] = -score
    if all(qid.isascii() and qid.isdigit() for qid in by_qid):
        qids = sorted(by_qid, key=lambda qid: (int(qid), qid))
    else:
        qids = sorted(by_qid)
    lines = []
    for qid in qids:
        docs = by_qid[qid]
        # docno breaks ties, so equal scores always come out in the same order.
        ranked = sorted(zip(docs.values(), docs))[:depth]
        head, end = f"{qid} Q0 ", f" {tag}\n"
        # repr round-trips every float exactly; -0.0 is written as 0.0.
        lines.extend([f"{head}{docno} {rank} {-neg_score + 0.0!r}{end}"
                      for rank, (neg_score, docno) in enumerate(ranked, 1)])
    return lines


def write_run(
    dest, run: Iterable[ScoredDoc], tag: str = "topicir", depth: int | None = 1000
) -> None:
    """Write a TREC run, ``qid Q0 docno rank score tag``.

    Parameters
    ----------
    dest : str, path-like or open text file
        A path is written atomically: to a temporary of this writer's own in the same
        directory, then `os.replace` (two writers of one path never mix their lines).
    run : iterable of ScoredDoc
        In any order. Topics are written in numeric order when all qids are numeric, else in
        string order; each topic's docs by descending score, ties by ascending docno.
    tag : str
        The run tag (last column).
    depth : int or None
        Docs kept per topic; None keeps all.
    """
    if depth is not None and (not isinstance(depth, int) or depth < 1):
        raise ValueError(f"depth must be a positive int or None, got {depth!r}")
    if not tag or len(tag.split()) != 1 or tag.strip() != tag:
        raise ValueError(f"tag must be one word without whitespace, got {tag!r}")
    lines = _run_lines(run, tag, depth)
    if hasattr(dest, "write"):
        dest.writelines(lines)
        return
    from models.common.atomic import atomic_open  # the writer model files use too

    with atomic_open(dest, "w", encoding="utf-8", newline="\n") as out:
        out.writelines(lines)
