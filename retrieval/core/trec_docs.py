"""TREC SGML document collections (AP88-90, SJMN91, ...): `Doc` and `read_collection`.

Re-exported by :mod:`retrieval.core.trec`, the one place callers import TREC formats from.
"""

import re
import warnings
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple

from .trec_io import (
    TAG,
    TrecFormatError,
    TrecFormatWarning,
    clean,
    is_literal,
    open_text,
    quote,
    source_name,
)

DEFAULT_TITLE_TAGS = ("HEAD", "HEADLINE", "HL", "TITLE", "TTL")
# Anserini's TrecCollection also indexes DATE; a date is not topical text, so we leave it out.
DEFAULT_TEXT_TAGS = ("TEXT", "LEADPARA", "LP", "DD")
_N_EMPTY_EXAMPLES = 3


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
    if hasattr(source, "read") or is_literal(source) or not Path(source).is_dir():
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
        with open_text(file) as (name, lines):
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
            f"{source_name(source)}: {n_empty} {have} no text, "
            f"e.g. {', '.join(empty_examples)}. They are kept, but no query can match them.",
            TrecFormatWarning,
        )


def _split_tags(line: str) -> Iterator[tuple[str | None, re.Match | None]]:
    """Split a line into (text, None) and (None, tag) pieces; the last text ends in a newline."""
    pos = 0
    for match in TAG.finditer(line):
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
                titles.append(clean(value))
            else:
                texts.append(clean(value))
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
                        f"text outside <DOC>: {quote(text)}. Put each document in "
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
