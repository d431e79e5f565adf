"""The terminal side of the console: prompt_toolkit loop, completion, history, Ctrl-C.
All logic is in :class:`retrieval.ui.console.Session`; this only reads lines and prints what
comes back."""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import numpy as np

from ..core.scoring import LAM, MU, Query, Scorer
from .console import _ALIASES, _PATH_ARGS, COMMANDS, HITS, Session, _load_model
from .console_text import to_plain

# -- the terminal loop ---------------------------------------------------------------------

# Longest line read: a query or a command never needs more, and prompt_toolkit keeps a copy of
# the line per key typed (its undo stack), so an unbounded paste without bracketed paste (every
# character a key) would grow the console's memory with the square of its length.
LINE_LIMIT = 4096

STYLE = {
    "hl": "bold fg:ansiyellow", "error": "fg:ansired bold", "warn": "fg:ansiyellow", "dim": "fg:ansibrightblack",
    "rank": "fg:ansibrightblack", "docno": "fg:ansicyan", "score": "", "title": "bold", "query": "bold",
    "rel": "fg:ansigreen bold", "changed": "fg:ansimagenta", "bottom-toolbar": "noreverse bg:ansiblack fg:ansiwhite",
}


def history_path() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "topicir" / "console_history"


def open_session(index_path, *, model=None, mu: float = MU, lam: float = LAM, field: str = "title",
                 topics=None, qrels=None, hits: int = HITS) -> Session:
    """Open the index, load the model and warm up the JVM and the scorer, so the first query is fast."""
    from ..core.index import Index

    index = Index(index_path)
    index.stats.doc_index  # built once here rather than during the first :doc
    index.stats.term_index
    model_obj = _load_model(model, index) if model else None
    loaded_topics = loaded_qrels = None
    if topics:
        from ..core.sources import load_topics

        loaded_topics = load_topics(topics)
    if qrels:
        from ..core.sources import load_qrels

        loaded_qrels = load_qrels(qrels)
    session = Session(index, mu=mu, lam=lam, model=model_obj, model_name=Path(model).stem if model else None,
                      field=field, topics=loaded_topics, qrels=loaded_qrels, hits=hits)
    index.analyze("warm up")  # starts the JVM
    if index.stats.n_docs:
        index.document(index.stats.docnos[0])  # opens the Lucene reader
    if model_obj is not None and index.stats.n_terms:
        # Loads the compiled mixture kernel from numba's cache.
        q = Query("", [], np.zeros(1, dtype=np.int64), np.ones(1), [])
        Scorer(index.stats, session.mu, 0.5, model_obj).score(q, np.ones((index.stats.n_docs, 1)))
    if threading.current_thread() is threading.main_thread():
        # The JVM installs its own SIGINT handler, which ends the process (exit 130) on Ctrl-C;
        # Python's handler turns Ctrl-C back into KeyboardInterrupt, which cancels the query.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return session


def _completer(session: Session):
    from prompt_toolkit.completion import Completer, Completion, PathCompleter
    from prompt_toolkit.document import Document

    paths = PathCompleter(expanduser=True)

    class ConsoleCompleter(Completer):
        def get_completions(self, document, complete_event):
            text = document.text_before_cursor
            if text[:1] in (":", "/"):
                name, sep, rest = text[1:].partition(" ")
                if not sep:
                    for c in COMMANDS:
                        if c.startswith(name):
                            yield Completion(c, start_position=-len(name))
                    return
                name = _ALIASES.get(name, name)
                word = rest.split(" ")[-1]
                if name in _PATH_ARGS and " " not in rest:
                    yield from paths.get_completions(Document(rest, len(rest)), complete_event)
                for c in session.completions(name):
                    if c.startswith(word) and c != word:
                        yield Completion(c, start_position=-len(word))
            elif text.startswith("#") and " " not in text:
                for qid in session.topics:
                    if qid.startswith(text[1:]):
                        yield Completion(qid, start_position=-(len(text) - 1))

    return ConsoleCompleter()


def _line_limit(buffer_text) -> object:
    """Key bindings that keep the line at :data:`LINE_LIMIT` characters: typed characters past
    it are dropped (with the terminal's bell), a bracketed paste is cut to fit."""
    from prompt_toolkit.filters import Condition
    from prompt_toolkit.key_binding import KeyBindings
    from prompt_toolkit.keys import Keys

    kb = KeyBindings()

    @kb.add(Keys.Any, filter=Condition(lambda: len(buffer_text()) >= LINE_LIMIT))
    def _full(event):
        event.app.output.bell()

    @kb.add(Keys.BracketedPaste)
    def _paste(event):
        data = event.data.replace("\r\n", "\n").replace("\r", "\n")
        event.current_buffer.insert_text(data[:max(0, LINE_LIMIT - len(event.current_buffer.text))])

    return kb


def repl(session: Session, *, input=None, output=None, history=None, write=None) -> int:
    """Read lines until :quit or Ctrl-D, run each through ``session.execute`` and print the reply.

    ``input``/``output`` are prompt_toolkit Input/Output objects (tests pass a pipe and a
    DummyOutput), ``history`` a prompt_toolkit History, ``write`` a callable taking fragments.
    """
    from prompt_toolkit import PromptSession, print_formatted_text
    from prompt_toolkit.formatted_text import FormattedText
    from prompt_toolkit.styles import Style

    style = Style.from_dict(STYLE)
    if write is None:
        def write(frags):
            print_formatted_text(FormattedText(frags), style=style, end="", output=output)
    def toolbar():
        full = len(prompt.default_buffer.text) >= LINE_LIMIT
        return session.toolbar() + (f" | line at its limit of {LINE_LIMIT:,} characters" if full else "")

    prompt = PromptSession(history=history, completer=_completer(session), complete_while_typing=False,
                           bottom_toolbar=toolbar, style=style, input=input, output=output,
                           enable_history_search=True, key_bindings=_line_limit(lambda: prompt.default_buffer.text))
    while not session.done:
        try:
            line = prompt.prompt([("class:query", f"{session.index.name}> ")])
        except KeyboardInterrupt:
            continue  # Ctrl-C at the prompt clears the line
        except EOFError:
            break
        if not line.strip():
            continue
        try:
            reply = session.execute(line)
        except KeyboardInterrupt:
            reply = [("class:warn", "cancelled\n")]
        if reply:
            write(reply)
    return 0


def plain_loop(session: Session, lines, out=None) -> int:
    """The console without a terminal (input piped in): one reply per line, highlights as *word*."""
    out = out or sys.stdout
    for line in lines:
        if session.done:
            break
        if not line.strip():
            continue
        out.write(f"{session.index.name}> {line.rstrip()}\n")
        try:
            reply = session.execute(line)
        except KeyboardInterrupt:
            reply = [("", "cancelled\n")]
        out.write(to_plain(reply))
        out.flush()
    return 0


def run_console(index_path, *, model=None, mu: float = MU, lam: float = LAM, field: str = "title",
                topics=None, qrels=None, hits: int = HITS, history: str | Path | None = None) -> int:
    """``topicir console``: open the index and read queries until Ctrl-D."""
    start = time.perf_counter()
    session = open_session(index_path, model=model, mu=mu, lam=lam, field=field, topics=topics,
                           qrels=qrels, hits=hits)
    s = session.stats
    banner = (f"topicir console: {session.index.name} ({s.n_docs:,} docs, {s.n_terms:,} terms), "
              f"{session.settings()}; ready in {time.perf_counter() - start:.1f} s. "
              f":help lists the commands, Ctrl-D quits.\n")
    if not sys.stdin.isatty():
        sys.stdout.write(banner)
        return plain_loop(session, sys.stdin)
    from prompt_toolkit.history import FileHistory, InMemoryHistory

    path = Path(history) if history else history_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        hist = FileHistory(str(path))
    except OSError as exc:
        banner += f"(history not saved: {exc})\n"
        hist = InMemoryHistory()
    sys.stdout.write(banner)
    return repl(session, history=hist)
