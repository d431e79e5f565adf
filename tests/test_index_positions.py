"""Reading term positions back from Lucene in bulk gives exactly what reading them a document at a
time (``IndexReaderUtils.getTermPositions``, the reader before the bulk one) gave."""
import json

import numpy as np
import pytest

import retrieval.core.index as index_module
import retrieval.core.readback as readback_module
from retrieval.core.index import add_documents, build_index
from retrieval.core.readback import read_positions as _read_positions, read_stats as _read_stats
from retrieval.core.jvm import jclass
from retrieval.core.stats import CollectionStats, StatsBuilder, _postings, _term_totals, doc_major, parse_term_positions

# Terms with commas, digits, accents, other scripts, possessives; the literal word "null"; stopword
# gaps; a document of stopwords only; repeated words.
DOCS = [
    ("A-1", "Apples", "The 3,000 apples of Müller's farm cost $4.50; naïve café owners paid 1,000,000."),
    ("A-2", "", "null and void: the null hypothesis, not the alternative. Null!"),
    ("B-7", "Grèce", "Αθήνα και Θεσσαλονίκη; 東京 and 北京 are cities. e-mail foo@bar.com at 10:30 p.m."),
    ("B-3", "", "to be or not to be, that is the question"),
    ("C-9", "Repeats", "banana banana banana split banana, the banana's bananas"),
    ("C-2", "", "The of and a an"),
    ("D-5", "Numbers", "1988 1989 1990 3.14159 2,718 U.S.A. I.B.M. x86_64 co-operate"),
    ("C-4", "", "I love 😀 and 🎉 parties 🎉"),  # terms beyond U+FFFF, which pyjnius garbles on the way to Java
]


def old_from_arrays(docnos, vocab, lens, term_ids, positions):
    """``CollectionStats.from_arrays`` as it was with the per-document reader: sorts, not kernels."""
    n_docs = len(docnos)
    terms = sorted(vocab)
    remap = np.empty(len(vocab), dtype=np.int32)
    remap[[vocab[t] for t in terms]] = np.arange(len(terms), dtype=np.int32)
    doc_ptr = np.cumsum(lens)
    term_ids = remap[term_ids] if len(term_ids) else term_ids
    doc_of = np.repeat(np.arange(n_docs, dtype=np.int64), np.diff(doc_ptr))
    order = np.lexsort((positions, doc_of))
    term_ids, positions = term_ids[order], positions[order]
    keys, tf = np.unique(term_ids.astype(np.int64) * max(n_docs, 1) + doc_of, return_counts=True)
    post_ptr = np.zeros(len(terms) + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys // max(n_docs, 1), minlength=len(terms)), out=post_ptr[1:])
    arrays = dict(doc_ptr=doc_ptr, term_ids=term_ids, positions=positions, post_ptr=post_ptr,
                  post_doc=(keys % max(n_docs, 1)).astype(np.int32), post_tf=tf.astype(np.int32))
    return CollectionStats(docnos, terms, arrays)


def per_document_stats(index_dir, docnos) -> CollectionStats:
    """The reader before the bulk one: each document's term positions as a Java map's string."""
    utils = jclass("io.anserini.index.IndexReaderUtils")
    reader = utils.getReader(str(index_dir.resolve()))
    builder = StatsBuilder()
    try:
        for docno in docnos:
            try:
                text = utils.getTermPositions(reader, docno).toString()
            except Exception as e:  # jnius.JavaException; importing jnius here would start the JVM unconfigured
                if "NotStoredException" not in str(e):
                    raise
                text = "{}"  # no term vector: a document of stopwords only
            builder.add(parse_term_positions(text))
    finally:
        reader.close()
    return old_from_arrays(docnos, builder.vocab, np.asarray(builder.lens, dtype=np.int64),
                           np.frombuffer(builder.term_ids, dtype=np.int32), np.frombuffer(builder.positions, dtype=np.int32))


def assert_same(a: CollectionStats, b: CollectionStats):
    assert a.docnos == b.docnos and a.terms == b.terms
    for name in ("doc_ptr", "term_ids", "positions", "post_ptr", "post_doc", "post_tf"):
        x, y = np.asarray(getattr(a, name)), np.asarray(getattr(b, name))
        assert x.dtype == y.dtype and x.shape == y.shape, name
        assert np.array_equal(x, y), name
    assert a.fingerprint == b.fingerprint


def write_jsonl(path, docs):
    path.write_text("".join(json.dumps({"id": d, "title": t, "contents": c}) + "\n" for d, t, c in docs))


@pytest.fixture(scope="module")
def tricky(tmp_path_factory):
    root = tmp_path_factory.mktemp("positions")
    write_jsonl(root / "docs.jsonl", DOCS)
    return build_index([root / "docs.jsonl"], root / "idx")


def test_bulk_reader_equals_per_document_reader(tricky):
    docnos = tricky.stats.docnos
    assert docnos == [d for d, _, _ in DOCS]
    assert_same(tricky.stats, per_document_stats(tricky.path, docnos))
    assert {"3,000", "null", "müller", "1,000,000", "😀", "🎉"} <= set(tricky.stats.terms)


def test_rows_follow_the_docnos_given_not_lucene_order(tricky):
    docnos = list(reversed(tricky.stats.docnos))
    docnos[1], docnos[4] = docnos[4], docnos[1]
    assert_same(_read_stats(tricky.path, docnos), per_document_stats(tricky.path, docnos))


def test_docnos_beyond_the_basic_plane(tmp_path):
    write_jsonl(tmp_path / "docs.jsonl", [("D-🎉", "", "party party time"), ("D-2", "", "time flies"), ("😀", "", "smile")])
    s = build_index([tmp_path / "docs.jsonl"], tmp_path / "idx").stats
    assert s.docnos == ["D-🎉", "D-2", "😀"]
    assert [[s.terms[t] for t in s.term_ids[s.doc_ptr[d]:s.doc_ptr[d + 1]]] for d in range(3)] == [
        ["parti", "parti", "time"], ["time", "fli"], ["smile"]]


def test_a_document_of_stopwords_only_is_an_empty_row(tricky):
    s = tricky.stats
    assert s.doc_len[s.doc_index["C-2"]] == 0
    assert s.doc_len[s.doc_index["B-3"]] == 1  # "question"
    d = s.doc_index["B-3"]
    assert [s.terms[t] for t in s.term_ids[s.doc_ptr[d]:s.doc_ptr[d + 1]]] == ["question"]
    assert s.positions[s.doc_ptr[d]:s.doc_ptr[d + 1]].tolist() == [9]


def test_many_segments_and_threads(tmp_path, monkeypatch):
    """Shards of a few documents indexed by several threads, read back in batches of a few terms."""
    rng = np.random.default_rng(3)
    words = ["alpha", "beta", "gamma", "delta", "the", "of", "epsilon", "zeta", "eta", "theta", "3,000", "naïve"]
    docs = [(f"S{i:03d}", "", " ".join(rng.choice(words, size=rng.integers(1, 40)))) for i in range(60)]
    write_jsonl(tmp_path / "docs.jsonl", docs)
    monkeypatch.setattr(index_module, "_SHARD_DOCS", 7)
    monkeypatch.setattr(readback_module, "_BATCH_TOKENS", 50)  # many small batches of terms
    idx = build_index([tmp_path / "docs.jsonl"], tmp_path / "idx", threads=3)
    assert_same(idx.stats, per_document_stats(idx.path, idx.stats.docnos))


def test_append_keeps_equal_to_per_document_reading(tmp_path, tricky):
    more = [("E-1", "", "apples and café au lait"), ("E-2", "", "brand new zeppelin words")]
    write_jsonl(tmp_path / "docs.jsonl", DOCS)
    write_jsonl(tmp_path / "more.jsonl", more)
    build_index([tmp_path / "docs.jsonl"], tmp_path / "idx")
    grown = add_documents([tmp_path / "more.jsonl"], tmp_path / "idx")
    assert len(list(grown.path.glob("*.si"))) == 2  # the appended segment
    assert grown.stats.docnos == [d for d, _, _ in DOCS + more]
    assert_same(grown.stats, per_document_stats(grown.path, grown.stats.docnos))


def test_documents_lucene_lacks_are_an_error(tricky):
    with pytest.raises(RuntimeError, match="Lucene indexed 8 documents of 6"):
        _read_positions(tricky.path, tricky.stats.docnos[:6])
    with pytest.raises(RuntimeError, match="not in its index"):
        _read_positions(tricky.path, tricky.stats.docnos[:7] + ["NOPE"])
    with pytest.raises(ValueError, match="line break"):
        _read_positions(tricky.path, tricky.stats.docnos[:7] + ["A\nB"])


def test_from_arrays_sorts_unordered_tokens_like_before():
    rng = np.random.default_rng(0)
    n_docs, n_terms = 50, 30
    lens = np.concatenate([[0], rng.integers(0, 20, n_docs)]).astype(np.int64)
    n = int(lens.sum())
    term_ids = rng.integers(0, n_terms, n).astype(np.int32)
    positions = np.concatenate([rng.permutation(k) * 2 for k in lens[1:]]).astype(np.int32)
    vocab = {f"t{i:02d}": int(j) for i, j in enumerate(rng.permutation(n_terms))}
    docnos = [f"d{i}" for i in range(n_docs)]
    assert_same(CollectionStats.from_arrays(docnos, vocab, lens, term_ids, positions),
                old_from_arrays(docnos, vocab, lens, term_ids, positions))
    # already in position order: the same again, without the sort
    doc_ptr = np.cumsum(lens)
    order = np.lexsort((positions, np.repeat(np.arange(n_docs), np.diff(doc_ptr))))
    assert_same(CollectionStats.from_arrays(docnos, vocab, lens, term_ids[order], positions[order]),
                old_from_arrays(docnos, vocab, lens, term_ids, positions))


def test_postings_kernel_equals_unique_of_term_doc_keys():
    rng = np.random.default_rng(1)
    doc_ptr = np.concatenate([[0], np.cumsum(rng.integers(0, 15, 40))]).astype(np.int64)
    term_ids = rng.integers(0, 25, doc_ptr[-1]).astype(np.int32)
    post_ptr, post_doc, post_tf = _postings(doc_ptr, term_ids, 25)
    doc_of = np.repeat(np.arange(40), np.diff(doc_ptr))
    keys, tf = np.unique(term_ids.astype(np.int64) * 40 + doc_of, return_counts=True)
    assert post_ptr.tolist() == [0] + np.cumsum(np.bincount(keys // 40, minlength=25)).tolist()
    assert post_doc.tolist() == (keys % 40).tolist() and post_tf.tolist() == tf.tolist()


def test_term_totals_kernel_equals_reduceat_of_the_postings():
    rng = np.random.default_rng(2)
    df = rng.integers(1, 9, 300)
    post_ptr = np.concatenate([[0], np.cumsum(df)]).astype(np.int64)
    post_tf = rng.integers(1, 2**31 - 1, post_ptr[-1]).astype(np.int32)  # sums beyond int32
    want = np.add.reduceat(post_tf.astype(np.int64), post_ptr[:-1])
    got = _term_totals(post_ptr, post_tf)
    assert got.dtype == np.int64 and got.tolist() == want.tolist() and want.max() > 2**31
    assert _term_totals(np.array([0, 2, 2, 3]), np.array([4, 5, 6], np.int32)).tolist() == [9, 0, 6]
    assert _term_totals(np.zeros(1, np.int64), np.zeros(0, np.int32)).tolist() == []


def test_doc_major_puts_term_major_postings_in_position_order():
    # term 0: doc 1 at 3, 7; doc 0 at 2.  term 1: doc 1 at 0, 5.  term 2: doc 0 at 0, 1.
    df = np.array([2, 1, 1])
    post_row = np.array([1, 0, 1, 0], dtype=np.int32)
    post_tf = np.array([2, 1, 2, 2], dtype=np.int32)
    positions = np.array([3, 7, 2, 0, 5, 0, 1], dtype=np.int32)
    doc_ptr, term_ids, pos = doc_major(df, post_row, post_tf, positions, 3)
    assert doc_ptr.tolist() == [0, 3, 7, 7]
    assert term_ids.tolist() == [2, 2, 0, 1, 0, 1, 0]
    assert pos.tolist() == [0, 1, 2, 0, 3, 5, 7]


def test_from_arrays_refuses_lengths_that_do_not_add_up():
    with pytest.raises(ValueError, match="add up to 3 tokens, given 2 term ids and 2 positions"):
        CollectionStats.from_arrays(["a", "b"], {"x": 0}, np.array([0, 1, 2]), np.zeros(2, np.int32), np.arange(2, dtype=np.int32))
