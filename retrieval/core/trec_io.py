"""Shared pieces of the TREC readers (:mod:`retrieval.core.trec`, :mod:`retrieval.core.trec_docs`):
the errors and warnings, opening a path / open file / literal text, and text cleaning.
"""

import contextlib
import gzip
import html
import io
import os
import re
import warnings
import zlib
from typing import Iterable, Iterator

# An SGML comment, or a start/end tag with optional attributes (FBIS has <F P=102>, SJMN <PG.COL>).
TAG = re.compile(r"<!--.*?-->|<(/?)([A-Za-z][\w.\-]*)(?:\s[^<>]*)?>")
# Only well-formed references with a ';' are decoded: topic files contain bare '&' ("RDT&E").
_ENTITY = re.compile(r"&(?:#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);")


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


# --- opening sources ------------------------------------------------------------------------


def is_literal(source) -> bool:
    return isinstance(source, str) and (not source or "\n" in source or "<" in source)


def source_name(source) -> str:
    if hasattr(source, "read"):
        return str(getattr(source, "name", "<file>"))
    return "<string>" if is_literal(source) else os.fspath(source)


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


# What reading a damaged .gz raises (BadGzipFile is an OSError, the others are not).
GZIP_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile)


@contextlib.contextmanager
def open_text(source) -> Iterator[tuple[str, Iterator[str]]]:
    """Yield ``(name, lines)`` for a path, an open file or literal text.

    Lines keep their line ends. Paths are read as bytes (gzip detected from the magic number)
    and decoded by `_decode_lines`; the file is closed when the block exits.
    """
    name = source_name(source)
    if hasattr(source, "read"):
        yield name, _decode_lines(source, name)
    elif is_literal(source):
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


def norm_qid(qid: str) -> str:
    """'051' -> '51'; non-numeric ids are kept as they are."""
    return str(int(qid)) if qid.isascii() and qid.isdigit() else qid


def _decode_entity(match: re.Match) -> str:
    ref = match.group(0)
    text = html.unescape(ref)
    # AP and other SGML sources write &AMP; as well as &amp;; unknown names (&hyph;) are kept.
    return text if text != ref else html.unescape(ref.lower())


def clean(text: str) -> str:
    return _ENTITY.sub(_decode_entity, text).strip()


def quote(text: str, limit: int = 60) -> str:
    text = text.strip()
    return repr(text if len(text) <= limit else text[:limit] + "...")
