"""Reading a Lucene index back into collection statistics: every document's exact term
positions, in bulk (term-major, one JVM call per batch of terms), into :class:`CollectionStats`.
"""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote

import numpy as np
from tqdm.auto import tqdm

from models.common.jit import njit

from .jvm import jclass
from .stats import CollectionStats, DocTokens, doc_major


class _LuceneReadBack:
    """Bulk reads of a Lucene index: one JVM call per batch of terms, not per document.

    Each pyjnius call is a JNI round trip, and Lucene decompresses a chunk of term vectors for every
    document looked up, so reading an index back a document at a time costs a round trip and a
    decompression per document. Here existing Java methods (Anserini's postings lists and ``java.util.stream``)
    are composed with ``java.lang.invoke.MethodHandles`` into functions that a parallel stream maps
    over a whole batch inside the JVM; a batch comes back as one ``int[]`` (as native-order bytes:
    pyjnius turns a ``byte[]`` into one buffer but an ``int[]`` into a list of Python ints). The
    bundled Java runtime has no compiler, so these helpers cannot be written in Java. Functional
    objects stay in the JVM: pyjnius cannot wrap the hidden classes ``MethodHandleProxies`` makes.
    """

    def __init__(self, reader):
        self.reader = reader
        self._mh = jclass("java.lang.invoke.MethodHandles")
        self._mt, self._lookup = jclass("java.lang.invoke.MethodType"), self._mh.publicLookup()
        self._postings = {decode: self._ints_as_bytes(self._postings_of_lines(decode)) for decode in (False, True)}
        self._terms = self._terms_listing()
        self._docids = {decode: self._ints_as_bytes(self._docids_of_lines(decode)) for decode in (False, True)}

    # -- composing handles ---------------------------------------------------------------------

    @staticmethod
    def _c(name: str):
        """A Java class object (``int``, ``long``, ``boolean``, ``void`` or a name such as ``[I``)."""
        prims = {"int": "java.lang.Integer", "long": "java.lang.Long", "boolean": "java.lang.Boolean", "void": "java.lang.Void"}
        return jclass(prims[name]).TYPE if name in prims else jclass("java.lang.Class").forName(name)

    def _type(self, ret: str, *args: str):
        return self._mt.methodType(self._c(ret), [self._c(a) for a in args]) if args else self._mt.methodType(self._c(ret))

    def _static(self, cls: str, name: str, ret: str, *args: str):
        return self._lookup.findStatic(self._c(cls), name, self._type(ret, *args))

    def _virtual(self, cls: str, name: str, ret: str, *args: str):
        return self._lookup.findVirtual(self._c(cls), name, self._type(ret, *args))

    def _then(self, *fns):
        """``fns[-1](...fns[1](fns[0](x)))``."""
        out = fns[0]
        for fn in fns[1:]:
            out = self._mh.filterReturnValue(out, fn)
        return out

    def _same_arg(self, fn, ret: str, arg: str):
        """``fn(x, x, ...)`` as a function of its one argument ``x``."""
        return self._mh.permuteArguments(fn, self._type(ret, arg), *([0] * fn.type().parameterCount()))

    def _constant_int(self, value: int):
        # pyjnius hands Python ints and bools to Object parameters as it sees fit; parse in Java.
        return self._mh.insertArguments(self._static("java.lang.Integer", "parseInt", "int", "java.lang.String"), 0, str(value))

    def _with_lambda(self, method, iface: str, fn):
        """``method(receiver, fn as an iface instance)`` as a function of the receiver."""
        make = self._static("java.lang.invoke.MethodHandleProxies", "asInterfaceInstance", "java.lang.Object",
                            "java.lang.Class", "java.lang.invoke.MethodHandle")
        instance = self._mh.insertArguments(make, 0, self._c(iface), fn).asType(self._type(iface))
        return self._mh.collectArguments(method, 1, instance)

    def _lines(self, decode: bool):
        """``(String)Stream<String>``: the lines of a string as an ordered parallel stream, each
        percent-decoded if ``decode``."""
        split = self._mh.insertArguments(self._virtual("java.lang.String", "split", "[Ljava.lang.String;", "java.lang.String"), 1, "\n")
        as_list = self._static("java.util.Arrays", "asList", "java.util.List", "[Ljava.lang.Object;")
        parallel = self._virtual("java.util.Collection", "parallelStream", "java.util.stream.Stream")
        lines = self._then(split, as_list.asType(self._type("java.util.List", "[Ljava.lang.String;")),
                           parallel.asType(self._type("java.util.stream.Stream", "java.util.List")))
        if not decode:
            return lines
        stream = "java.util.stream.Stream"
        url_decode = self._mh.insertArguments(self._static("java.net.URLDecoder", "decode", "java.lang.String", "java.lang.String",
                                                           "java.lang.String"), 1, "UTF-8")
        return self._then(lines, self._with_lambda(self._virtual(stream, "map", stream, "java.util.function.Function"),
                                                   "java.util.function.Function", url_decode))

    def _call(self, handles, strings: list[str]):
        """``handles[decode]`` applied to ``strings`` sent as lines. pyjnius garbles characters beyond
        U+FFFF (emoji) on their way to Java, so strings with such characters go percent-encoded."""
        text = "\n".join(strings)
        if _ASTRAL.search(text) is None:
            return handles[False].invokeWithArguments(text)
        return handles[True].invokeWithArguments("\n".join(quote(s, safe="") for s in strings))

    def _ints_as_bytes(self, fn):
        """``fn`` with its ``int[]`` result copied into a ``byte[]``, native byte order."""
        mh, buf = self._mh, "java.nio.ByteBuffer"
        n_bytes = mh.collectArguments(self._static("java.lang.Math", "multiplyExact", "int", "int", "int"), 1, self._constant_int(4))
        native = mh.insertArguments(self._virtual(buf, "order", buf, "java.nio.ByteOrder"), 1, jclass("java.nio.ByteOrder").nativeOrder())
        alloc = self._then(mh.arrayLength(self._c("[I")), n_bytes, self._static(buf, "allocate", buf, "int"), native)
        put = mh.filterArguments(self._virtual("java.nio.IntBuffer", "put", "java.nio.IntBuffer", "[I"), 0,
                                 self._virtual(buf, "asIntBuffer", "java.nio.IntBuffer"))
        # (ints) -> buf = alloc(ints); put(buf, ints); buf.array()
        fill = mh.foldArguments(mh.dropArguments(self._virtual(buf, "array", "[B"), 1, self._c("[I")), mh.dropReturn(put))
        return self._then(fn, mh.foldArguments(fill, alloc))

    def _postings_of_lines(self, decode: bool):
        """``(String)int[]``: for each line (a term), its postings as docid, tf, tf positions."""
        mh, posting, ints = self._mh, "io.anserini.index.IndexReaderUtils$Posting", "java.util.stream.IntStream"
        head = mh.filterArguments(self._static(ints, "of", ints, "[I").asCollector(self._c("[I"), 2), 0,
                                  self._virtual(posting, "getDocid", "int"), self._virtual(posting, "getTF", "int"))
        tail = self._then(self._virtual(posting, "getPositions", "[I"), self._static("java.util.Arrays", "stream", ints, "[I"))
        one = self._same_arg(mh.filterArguments(self._static(ints, "concat", ints, ints, ints), 0,
                                                self._same_arg(head, ints, posting), tail), ints, posting)
        flat_map = self._virtual("java.util.stream.Stream", "flatMapToInt", ints, "java.util.function.Function")
        # Lucene docids come in ascending order, positions ascending within each.
        postings = mh.insertArguments(self._static("io.anserini.index.IndexReaderUtils", "getPostingsListForAnalyzedTerm",
                                                   "java.util.List", "org.apache.lucene.index.IndexReader", "java.lang.String"),
                                      0, self.reader)
        term = self._then(postings, self._virtual("java.util.Collection", "stream", "java.util.stream.Stream").asType(
            self._type("java.util.stream.Stream", "java.util.List")), self._with_lambda(flat_map, "java.util.function.Function", one))
        return self._then(self._lines(decode), self._with_lambda(flat_map, "java.util.function.Function", term),
                          self._virtual(ints, "toArray", "[I"))

    def _terms_listing(self):
        """``(String)String``, the argument ignored: a line ``cf df term`` for each term of ``contents``."""
        mh, it, s = self._mh, "io.anserini.index.IndexReaderUtils$IndexTerm", "java.lang.String"
        concat = self._virtual(s, "concat", s, s)
        space = mh.insertArguments(concat, 1, " ")
        cf = self._then(self._virtual(it, "getTotalTF", "long"), self._static(s, "valueOf", s, "long"), space)
        df = self._then(self._virtual(it, "getDF", "int"), self._static(s, "valueOf", s, "int"), space)
        line = self._same_arg(mh.filterArguments(concat, 0, cf, df), s, it)
        line = self._same_arg(mh.filterArguments(concat, 0, line, self._virtual(it, "getTerm", s)), s, it)
        spliterator = mh.collectArguments(self._static("java.util.Spliterators", "spliteratorUnknownSize", "java.util.Spliterator",
                                                       "java.util.Iterator", "int"),
                                          1, self._constant_int(jclass("java.util.Spliterator").ORDERED))
        sequential = mh.collectArguments(self._static("java.util.stream.StreamSupport", "stream", "java.util.stream.Stream",
                                                      "java.util.Spliterator", "boolean"), 1, mh.zero(self._c("boolean")))
        stream = "java.util.stream.Stream"
        mapped = self._with_lambda(self._virtual(stream, "map", stream, "java.util.function.Function"), "java.util.function.Function", line)
        joined = mh.collectArguments(self._virtual(stream, "collect", "java.lang.Object", "java.util.stream.Collector"), 1,
                                     mh.insertArguments(self._static("java.util.stream.Collectors", "joining", "java.util.stream.Collector",
                                                                     "java.lang.CharSequence"), 0, "\n"))
        terms = mh.insertArguments(self._static("io.anserini.index.IndexReaderUtils", "getTerms", "java.util.Iterator",
                                                "org.apache.lucene.index.IndexReader"), 0, self.reader)
        listing = self._then(terms, spliterator, sequential, mapped, joined.asType(self._type(s, stream)))
        return mh.dropArguments(listing, 0, self._c(s))  # a handle of no arguments cannot be invoked through pyjnius

    def _docids_of_lines(self, decode: bool):
        """``(String)int[]``: the Lucene docid of each line (a docno), its first posting in the ``id`` field."""
        mh, penum, ref = self._mh, "org.apache.lucene.index.PostingsEnum", "org.apache.lucene.util.BytesRef"
        as_bytes = self._lookup.findConstructor(self._c(ref), self._type("void", "java.lang.CharSequence"))
        enum = self._static("org.apache.lucene.index.MultiTerms", "getTermPostingsEnum", penum,
                            "org.apache.lucene.index.IndexReader", "java.lang.String", ref)
        enum = mh.filterArguments(mh.insertArguments(enum, 0, self.reader, "id"), 0, as_bytes.asType(self._type(ref, "java.lang.String")))
        first = self._then(enum, self._virtual(penum, "nextDoc", "int"))
        map_to_int = self._virtual("java.util.stream.Stream", "mapToInt", "java.util.stream.IntStream", "java.util.function.ToIntFunction")
        return self._then(self._lines(decode), self._with_lambda(map_to_int, "java.util.function.ToIntFunction", first),
                          self._virtual("java.util.stream.IntStream", "toArray", "[I"))

    # -- reads ---------------------------------------------------------------------------------

    def terms(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        """The terms of ``contents`` in Lucene's (sorted) order, with their collection and document
        frequencies (int64)."""
        if jclass("org.apache.lucene.index.MultiTerms").getTerms(self.reader, "contents") is None:
            empty = np.zeros(0, dtype=np.int64)  # no document has a term: the field has no terms at all
            return [], empty, empty
        text = self._terms.invokeWithArguments("")
        cf, df, terms = zip(*(line.split(" ", 2) for line in text.split("\n"))) if text else ((), (), ())
        return list(terms), np.array(cf, dtype=np.int64), np.array(df, dtype=np.int64)

    def postings(self, terms: list[str]) -> np.ndarray:
        """The postings of ``terms``, one term after the other, each posting as docid, tf and the tf
        positions (int32)."""
        return np.frombuffer(self._call(self._postings, terms).tostring(), dtype=np.int32)

    def docids(self, docnos: list[str]) -> np.ndarray:
        """The Lucene docid of each of ``docnos`` (int32)."""
        bad = next((d for d in docnos if "\n" in d or not d), None)
        if bad is not None:  # sent as lines
            raise ValueError(f"DOCNO {bad!r} is empty or contains a line break")
        try:
            found = self._call(self._docids, docnos)
        except Exception as e:  # jnius.JavaException: a docno Lucene does not have has no postings
            raise RuntimeError(f"a document given to Anserini is not in its index ({str(e).splitlines()[0]})") from e
        return np.frombuffer(found.tostring(), dtype=np.int32)


_ASTRAL = re.compile("[\U00010000-\U0010FFFF]")
_BATCH_TOKENS = 4_000_000  # positions of a batch of terms: an int[] of under 3 times as many ints


def read_positions(lucene_dir: Path, docnos: list[str]) -> DocTokens:
    """Exact term positions of ``docnos`` (rows in that order), read back from the Lucene index."""
    utils = jclass("io.anserini.index.IndexReaderUtils")
    reader = utils.getReader(str(Path(lucene_dir).resolve()))
    try:
        if reader.numDocs() != len(docnos) or reader.maxDoc() != len(docnos):
            raise RuntimeError(f"Lucene indexed {reader.numDocs()} documents of {len(docnos)} given; "
                               f"see the warnings above")
        lucene = _LuceneReadBack(reader)
        docids = lucene.docids(docnos)
        row_of = np.full(len(docnos), -1, dtype=np.int32)
        if len(docids) != len(docnos) or docids.min(initial=0) < 0 or docids.max(initial=0) >= len(docnos):
            raise RuntimeError(f"{lucene_dir}: Lucene's document ids do not match the {len(docnos)} documents given")
        row_of[docids] = np.arange(len(docnos), dtype=np.int32)
        if (row_of < 0).any():
            raise RuntimeError(f"{lucene_dir}: two documents given share a Lucene document id")
        terms, cf, df = lucene.terms()
        expect = (reader.getSumTotalTermFreq("contents"), reader.getSumDocFreq("contents"))
        if (int(cf.sum()), int(df.sum())) != expect:
            raise RuntimeError(f"{lucene_dir}: read {cf.sum()} tokens in {df.sum()} postings, Lucene counts {expect[0]} "
                               f"in {expect[1]}")
        post_doc = np.empty(int(df.sum()), dtype=np.int32)
        post_tf = np.empty(int(df.sum()), dtype=np.int32)
        positions = np.empty(int(cf.sum()), dtype=np.int32)
        cum, lo, n_post, n_pos = np.cumsum(cf), 0, 0, 0
        with tqdm(total=int(cf.sum()), desc="reading term positions", unit=" tokens", unit_scale=True,
                  mininterval=2) as bar:
            while lo < len(terms):
                hi = max(lo + 1, int(np.searchsorted(cum, n_pos + _BATCH_TOKENS, side="right")))
                got = _unpack_postings(lucene.postings(terms[lo:hi]), post_doc, post_tf, positions, n_post, n_pos)
                if got != (n_post + int(df[lo:hi].sum()), n_pos + int(cf[lo:hi].sum())):
                    raise RuntimeError(f"{lucene_dir}: the postings of terms {terms[lo]!r}..{terms[hi - 1]!r} do not "
                                       f"match their frequencies")
                bar.update(got[1] - n_pos)
                n_post, n_pos, lo = got[0], got[1], hi
    finally:
        reader.close()
    doc_ptr, term_ids, pos = doc_major(df, row_of[post_doc], post_tf, positions, len(docnos))
    return DocTokens(terms, doc_ptr, term_ids, pos)


@njit(cache=True)
def _unpack_postings(data, post_doc, post_tf, positions, n_post, n_pos):
    """Postings flattened as docid, tf, tf positions into the arrays from offsets ``n_post`` and
    ``n_pos``; returns the new offsets (short data stops early, with offsets that do not add up)."""
    i = 0
    while i + 1 < len(data) and n_post < len(post_doc):
        post_doc[n_post], tf = data[i], data[i + 1]
        post_tf[n_post] = tf
        i += 2
        if i + tf > len(data) or n_pos + tf > len(positions):
            break
        positions[n_pos:n_pos + tf] = data[i:i + tf]
        n_post, n_pos, i = n_post + 1, n_pos + tf, i + tf
    return n_post, n_pos


def read_stats(lucene_dir: Path, docnos: list[str]) -> CollectionStats:
    """Exact term positions of every document, read back from the Lucene index."""
    return read_positions(lucene_dir, docnos).stats(docnos)
