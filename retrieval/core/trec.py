"""TREC file formats: document collections, topics, qrels and runs.

This is the only module that parses or writes TREC files. Each format maps to a small
NamedTuple (`Doc`, `Topic`, `Qrel`, `ScoredDoc`). Every reader takes a path (str or
`pathlib.Path`, gzip detected from the bytes), an open file, or literal text: a str that
is empty or contains a newline or a "<" is read as text, any other str is a path
(cf. ``ir_measures/util.py``).

Bad input raises `TrecFormatError` as ``path:LINE: problem, quoting the bad value. What to do.``
Recoverable surprises are warnings of category `TrecFormatWarning`.
"""

import contextlib
import gzip
import html
import io
import math
import os
import re
import warnings
import zlib
from collections import defaultdict
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple

__all__ = [
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

DEFAULT_TITLE_TAGS = ("HEAD", "HEADLINE", "HL", "TITLE", "TTL")
# Anserini's TrecCollection also indexes DATE; a date is not topical text, so we leave it out.
DEFAULT_TEXT_TAGS = ("TEXT", "LEADPARA", "LP", "DD")
TOPIC_FIELDS = ("title", "desc", "narr", "title+desc")

# An SGML comment, or a start/end tag with optional attributes (FBIS has <F P=102>, SJMN <PG.COL>).
_TAG = re.compile(r"<!--.*?-->|<(/?)([A-Za-z][\w.\-]*)(?:\s[^<>]*)?>")
# Only well-formed references with a ';' are decoded: topic files contain bare '&' ("RDT&E").
_ENTITY = re.compile(r"&(?:#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);")
_TOP = re.compile(r"<top>(.*?)(?:</top>|(?=<top>)|\Z)", re.IGNORECASE | re.DOTALL)
_TOPIC_PREFIX = {
    "num": re.compile(r"^\s*Number\s*:", re.IGNORECASE),
    "title": re.compile(r"^\s*Topic\s*:", re.IGNORECASE),
    "desc": re.compile(r"^\s*Description\s*:", re.IGNORECASE),
    "narr": re.compile(r"^\s*Narrative\s*:", re.IGNORECASE),
}
_N_EMPTY_EXAMPLES = 3


class TrecFormatError(ValueError):
    """A TREC file that cannot be read; `source` and `line` (1-based, or None) say where.

    The message is ``"source:line: problem"``; a `problem` that already starts with that
    prefix is kept as it is.
    """

    def __init__(self, problem: str, source: str, line: int | None = None):
        self.problem = problem
        self.source = source
        self.line = line
        where = source if line is None else f"{source}:{line}"
        super().__init__(problem if problem.startswith(f"{where}:") else f"{where}: {problem}")


class TrecFormatWarning(UserWarning):
    """A recoverable surprise in a TREC file (skipped document, duplicate judgment, ...)."""


class Doc(NamedTuple):
    """One document of a TREC SGML collection."""

    docno: str
    title: str  # headline-like elements joined with "\n", "" if none
    text: str  # body-like elements joined with "\n"
    source: str  # file path, "<string>" for literal text
    line: int  # 1-based line of the <DOC> tag

    @property
    def contents(self) -> str:
        """Title and text: what gets indexed."""
        return (self.title + "\n" + self.text).strip()


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


# --- opening sources ------------------------------------------------------------------------


def _is_literal(source) -> bool:
    return isinstance(source, str) and (not source or "\n" in source or "<" in source)


def _source_name(source) -> str:
    if hasattr(source, "read"):
        return str(getattr(source, "name", "<file>"))
    return "<string>" if _is_literal(source) else os.fspath(source)


def _decode_lines(lines: Iterable, name: str) -> Iterator[str]:
    """Decode byte lines as UTF-8, falling back to latin-1 line by line.

    Line by line, so that a 700 MB file streams and a file mixing both encodings keeps its
    UTF-8 lines; one warning per file names the first line that is not UTF-8.
    """
    warned = False
    for lineno, line in enumerate(lines, 1):
        if isinstance(line, bytes):
            try:
                line = line.decode("utf-8")
            except UnicodeDecodeError:
                line = line.decode("latin-1")
                if not warned:
                    warnings.warn(
                        f"{name}: line {lineno}: not valid UTF-8; decoded as latin-1",
                        TrecFormatWarning,
                    )
                    warned = True
        if lineno == 1:
            line = line.removeprefix("\ufeff")
        yield line


@contextlib.contextmanager
def _open_text(source) -> Iterator[tuple[str, Iterator[str]]]:
    """Yield ``(name, lines)`` for a path, an open file or literal text.

    Lines keep their line ends. Paths are read as bytes (gzip detected from the magic number)
    and decoded by `_decode_lines`; the file is closed when the block exits.
    """
    name = _source_name(source)
    if hasattr(source, "read"):
        yield name, _decode_lines(source, name)
    elif _is_literal(source):
        yield name, iter(io.StringIO(source))
    else:
        with open(name, "rb") as raw:
            magic = raw.peek(2)[:2]
            if magic == b"\x1f\x9d":
                raise TrecFormatError(
                    "compressed with Unix compress (.Z), which Python cannot read. "
                    "Unpack it first (gzip -d or uncompress).",
                    name,
                )
            if magic == b"\x1f\x8b":
                with gzip.GzipFile(fileobj=raw) as unzipped:
                    try:
                        yield name, _decode_lines(unzipped, name)
                    except GZIP_ERRORS as exc:
                        raise TrecFormatError(f"truncated or corrupt gzip data ({exc}). "
                                              f"Download or copy the file again.", name) from None
            else:
                yield name, _decode_lines(raw, name)


# What reading a damaged .gz raises (BadGzipFile is an OSError, the others are not).
GZIP_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile)


def _norm_qid(qid: str) -> str:
    """'051' -> '51'; non-numeric ids are kept as they are."""
    return str(int(qid)) if qid.isascii() and qid.isdigit() else qid


def _decode_entity(match: re.Match) -> str:
    ref = match.group(0)
    text = html.unescape(ref)
    # AP and other SGML sources write &AMP; as well as &amp;; unknown names (&hyph;) are kept.
    return text if text != ref else html.unescape(ref.lower())


def _clean(text: str) -> str:
    return _ENTITY.sub(_decode_entity, text).strip()


def _quote(text: str, limit: int = 60) -> str:
    text = text.strip()
    return repr(text if len(text) <= limit else text[:limit] + "...")


# --- documents ------------------------------------------------------------------------------


def read_collection(
    source,
    title_tags: Iterable[str] = DEFAULT_TITLE_TAGS,
    text_tags: Iterable[str] = DEFAULT_TEXT_TAGS,
    on_error: str = "raise",
    warn_empty: bool = True,
) -> Iterator[Doc]:
    """Read a TREC SGML collection (AP88-90, SJMN91, ../shared/data/*/docs), one Doc at a time.

    Parameters
    ----------
    source : str, path-like or open file
        A file (plain or gzip), a directory (all regular files below it in sorted order,
        except dot-files and names starting with "readme"), literal SGML text, or an open file.
    title_tags, text_tags : iterable of str
        Elements (case-insensitive) whose text goes into ``Doc.title`` and ``Doc.text``, in
        document order. Other elements are metadata and ignored; markup nested inside a kept
        element is dropped and its text kept. Entities such as ``&amp;`` are decoded.
    on_error : {"raise", "warn"}
        What to do with a bad document (unclosed <DOC>, no or empty <DOCNO>, DOCNO seen
        before) or text outside <DOC>: raise `TrecFormatError`, or warn and skip it
        (keeping the first of two documents with the same DOCNO).

    warn_empty : bool
        Warn once at the end about documents without text (callers that handle them
        themselves, like the indexer, turn this off).

    Yields
    ------
    Doc
        In file order. Documents without text are yielded too.

    Raises
    ------
    TrecFormatError
        For bad input when ``on_error="raise"``, naming the file and line.
    """
    if on_error not in ("raise", "warn"):
        raise ValueError(f"on_error must be 'raise' or 'warn', got {on_error!r}")
    title_tags = frozenset(tag.upper() for tag in title_tags)
    text_tags = frozenset(tag.upper() for tag in text_tags)
    reserved = (title_tags & text_tags) | ((title_tags | text_tags) & {"DOC", "DOCNO"})
    if reserved:
        raise ValueError(
            f"tags {sorted(reserved)} are in both title_tags and text_tags, or are DOC/DOCNO; "
            "give each element one role"
        )
    return _iter_collection(source, title_tags, text_tags, on_error, warn_empty)


def collection_files(source) -> list:
    """The files a collection source stands for (a directory: its collection files, sorted)."""
    if hasattr(source, "read") or _is_literal(source) or not Path(source).is_dir():
        return [source]
    root = Path(source)
    files = sorted(
        path
        for path in root.rglob("*")
        if path.is_file()
        and not any(part.startswith(".") for part in path.relative_to(root).parts)
        and not path.name.lower().startswith("readme")
    )
    if not files:
        raise TrecFormatError("directory has no collection files.", str(source))
    return files


def _iter_collection(source, title_tags, text_tags, on_error, warn_empty) -> Iterator[Doc]:
    seen: dict[str, tuple[str, int]] = {}  # docno -> (file, line) of its first <DOC>
    n_empty = 0
    empty_examples: list[str] = []
    for file in collection_files(source):
        with _open_text(file) as (name, lines):
            for item in _parse_docs(name, lines, title_tags, text_tags):
                if isinstance(item, Doc) and item.docno in seen:
                    first_file, first_line = seen[item.docno]
                    item = TrecFormatError(
                        f"duplicate DOCNO {item.docno!r}; it was first used at "
                        f"{first_file}:{first_line}. DOCNOs must be unique across the collection.",
                        item.source,
                        item.line,
                    )
                if isinstance(item, TrecFormatError):
                    if on_error == "raise":
                        raise item
                    warnings.warn(f"{item} Skipped.", TrecFormatWarning)
                    continue
                seen[item.docno] = (item.source, item.line)
                if not item.contents:
                    n_empty += 1
                    if len(empty_examples) < _N_EMPTY_EXAMPLES:
                        empty_examples.append(f"{item.docno} ({item.source}:{item.line})")
                yield item
    if n_empty and warn_empty:
        have = "documents have" if n_empty > 1 else "document has"
        warnings.warn(
            f"{_source_name(source)}: {n_empty} {have} no text, "
            f"e.g. {', '.join(empty_examples)}. They are kept, but no query can match them.",
            TrecFormatWarning,
        )


def _split_tags(line: str) -> Iterator[tuple[str | None, re.Match | None]]:
    """Split a line into (text, None) and (None, tag) pieces; the last text ends in a newline."""
    pos = 0
    for match in _TAG.finditer(line):
        if match.start() > pos:
            yield line[pos : match.start()], None
        yield None, match
        pos = match.end()
    yield line[pos:] + "\n", None


def _parse_docs(name, lines, title_tags, text_tags) -> Iterator["Doc | TrecFormatError"]:
    """Yield the Docs of one file, and TrecFormatErrors (not raised) where it is bad.

    A state machine over lines: outside or inside a <DOC>, and inside it at most one open
    top-level element (`field`). Inside an element only its own end tag counts; any other
    tag is markup, dropped.
    """
    wanted = title_tags | text_tags | {"DOCNO"}
    in_doc = False
    stray_reported = False  # one error per run of text outside <DOC>
    doc_line = docno = problem = None
    titles: list[str] = []
    texts: list[str] = []
    field = keep = None  # open element; list collecting its text, None if it is metadata
    field_line = nest = 0

    def close_field():
        nonlocal docno, problem, field, keep
        if keep is not None:
            value = "".join(keep)
            if field == "DOCNO":
                value = value.strip()
                if docno is not None:
                    problem = problem or TrecFormatError(
                        f"second <DOCNO> {value!r} in the document {docno!r} that starts at "
                        f"line {doc_line}. Is a </DOC><DOC> missing?",
                        name,
                        field_line,
                    )
                elif not value:
                    problem = problem or TrecFormatError(
                        "empty <DOCNO>. Give every document an id.", name, field_line
                    )
                else:
                    docno = value
            elif field in title_tags:
                titles.append(_clean(value))
            else:
                texts.append(_clean(value))
        field = keep = None

    for lineno, line in enumerate(lines, 1):
        line = line.rstrip("\r\n")
        if "<" not in line:  # fast path: most lines are body text
            pieces = ((line + "\n", None),)
        else:
            pieces = _split_tags(line)
        for text, tag in pieces:
            if text is not None:
                if keep is not None:
                    keep.append(text)
                elif not in_doc and text.strip() and not stray_reported:
                    stray_reported = True
                    yield TrecFormatError(
                        f"text outside <DOC>: {_quote(text)}. Put each document in "
                        "<DOC>...</DOC>; is this a TREC SGML file?",
                        name,
                        lineno,
                    )
                continue
            if tag.group(2) is None:  # an SGML comment
                continue
            closing, tag_name = tag.group(1) == "/", tag.group(2).upper()
            if tag_name == "DOC" and not closing:
                if in_doc:
                    yield TrecFormatError(
                        f"<DOC> is not closed: a new <DOC> starts at line {lineno} before "
                        "</DOC>. Add the missing </DOC>.",
                        name,
                        doc_line,
                    )
                in_doc, stray_reported = True, False
                doc_line, docno, problem, titles, texts = lineno, None, None, [], []
                field = keep = None
            elif not in_doc:
                if not stray_reported:
                    stray_reported = True
                    yield TrecFormatError(
                        f"{tag.group(0)!r} outside <DOC>. Put each document in "
                        "<DOC>...</DOC>; is this a TREC SGML file?",
                        name,
                        lineno,
                    )
            elif tag_name == "DOC":  # </DOC>
                if field is not None:
                    close_field()  # an element left open ends with its document
                in_doc = False
                if problem is None and docno is None:
                    problem = TrecFormatError(
                        "document has no <DOCNO>. Give every <DOC> a <DOCNO>...</DOCNO>.",
                        name,
                        doc_line,
                    )
                yield problem or Doc(docno, "\n".join(filter(None, titles)),
                                     "\n".join(filter(None, texts)), name, doc_line)
            elif field is None:
                if not closing:  # a stray end tag between elements is ignored
                    field, field_line, nest = tag_name, lineno, 0
                    keep = [] if tag_name in wanted else None
            elif tag_name == field:
                if not closing:
                    nest += 1
                elif nest:
                    nest -= 1
                else:
                    close_field()
    if in_doc:
        yield TrecFormatError(
            "<DOC> is not closed before the end of the file. Add the missing </DOC>; "
            "is the file truncated?",
            name,
            doc_line,
        )


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
    with _open_text(source) as (name, lines):
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
        tags = [tag for tag in _TAG.finditer(block) if tag.group(2) is not None]
        fields: dict[str, str] = {}
        for tag, next_tag in zip(tags, tags[1:] + [None]):
            key = tag.group(2).lower()
            if tag.group(1) or key not in _TOPIC_PREFIX or key in fields:
                continue
            value = block[tag.end() : next_tag.start() if next_tag else len(block)]
            value = _TOPIC_PREFIX[key].sub("", value, count=1)
            fields[key] = " ".join(_clean(value).split())
        qid = fields.get("num", "")
        if not qid or len(qid.split()) > 1:
            raise TrecFormatError(
                f"topic has no usable <num>: {qid!r}. Write <num> Number: 51.", name, line
            )
        topic = Topic(_norm_qid(qid), fields.get("title", ""), fields.get("desc", ""),
                      fields.get("narr", ""))
        yield topic, line


def _tsv_topics(text: str, name: str) -> Iterator[tuple[Topic, int]]:
    for line, row in enumerate(text.split("\n"), 1):
        if not row.strip():
            continue
        qid, tab, query = row.partition("\t")
        if not tab or not qid.strip():
            raise TrecFormatError(
                f"expected 'qid<TAB>query', got {_quote(row)}. Separate id and query by a tab.",
                name,
                line,
            )
        yield Topic(_norm_qid(qid.strip()), " ".join(query.split()), "", ""), line


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
    with _open_text(source) as (name, lines):
        for lineno, line in enumerate(lines, 1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != 4:
                hint = {3: 'Is the "iter" column missing?', 6: "Is this a run file?"}
                raise TrecFormatError(
                    f'expected 4 fields "qid iter docno rel", got {len(fields)}: '
                    f"{_quote(line, 80)}. {hint.get(len(fields), 'Is this a qrels file?')}",
                    name,
                    lineno,
                )
            qid, _, docno, rel = fields
            try:
                rel = int(rel)
            except ValueError:
                raise TrecFormatError(
                    f"relevance must be an integer, got {rel!r} in {_quote(line, 80)}.",
                    name,
                    lineno,
                ) from None
            key = (_norm_qid(qid), docno)
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
    """Read a TREC run, ``qid Q0 docno rank score tag`` per line; file order, qids normalized."""
    run = []
    with _open_text(source) as (name, lines):
        for lineno, line in enumerate(lines, 1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != 6:
                hint = "Is this a qrels file?" if len(fields) == 4 else "Is this a run file?"
                raise TrecFormatError(
                    f'expected 6 fields "qid Q0 docno rank score tag", got {len(fields)}: '
                    f"{_quote(line, 80)}. {hint}",
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
                    f"makes the ranking undefined. Fix the system that wrote {_quote(line, 80)}.",
                    name,
                    lineno,
                )
            score = score_value
            run.append(ScoredDoc(_norm_qid(qid), docno, score))
    return run


def _run_lines(run: Iterable[ScoredDoc], tag: str, depth: int | None) -> list[str]:
    by_qid: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for qid, docno, score in run:
        score = float(score)  # numpy scalars repr as "np.float64(...)"
        if not math.isfinite(score):
            raise ValueError(f"score of topic {qid!r}, doc {docno!r} is {score!r}; rankings need "
                             f"finite numbers")
        for what, value in (("qid", qid), ("docno", docno)):
            if not value or len(value.split()) != 1 or value.strip() != value:
                raise ValueError(f"{what} must be non-empty without whitespace, got {value!r}")
        by_qid[qid].append((-score, docno))
    if all(qid.isascii() and qid.isdigit() for qid in by_qid):
        qids = sorted(by_qid, key=lambda qid: (int(qid), qid))
    else:
        qids = sorted(by_qid)
    lines = []
    for qid in qids:
        # docno breaks ties, so equal scores always come out in the same order.
        ranked = sorted(by_qid[qid])[:depth]
        for rank, (neg_score, docno) in enumerate(ranked, 1):
            # repr round-trips every float exactly; -0.0 is written as 0.0.
            lines.append(f"{qid} Q0 {docno} {rank} {-neg_score + 0.0!r} {tag}\n")
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
    from models.atomic import atomic_open  # the writer model files use too

    with atomic_open(dest, "w", encoding="utf-8", newline="\n") as out:
        out.writelines(lines)
