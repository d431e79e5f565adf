"""Model files memory-mapped, not read (models/common/checkpoint.py): a model's integer members
are views of the file, its checks and per-model passes hold a chunk of a table at a time, and
a damaged mapped member is still refused in one line naming the file."""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from models import LDA, synthetic_corpus
from models.common import checkpoint as ck

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    corpus = synthetic_corpus(120, 60, 30, seed=5, n_latent=4)
    m = LDA(n_topics=6, n_chains=2, n_iter=12, burn_in=6, sample_every=3, seed=2).fit(corpus)
    path = tmp_path_factory.mktemp("mapped") / "lda.npz"
    m.save(path)
    return corpus, m, path


def test_integer_and_float_members_are_mapped(saved, monkeypatch):
    corpus, m, path = saved
    monkeypatch.setattr(ck, "MAP_BYTES", 1)
    loaded = LDA.load(path, fingerprint=corpus.fingerprint, doc_len=np.diff(corpus.doc_ptr))
    for name in ("kd_ptr", "kd_doc", "kd_count", "tw_ptr", "tw_topic", "tw_count", "n_k_samples", "doc_len"):
        a = getattr(loaded, name + "_")
        assert ck.is_mapped(a) and not a.flags.owndata and a.flags.writeable, name
    assert ck.is_mapped(loaded.alpha_samples_)  # floats too, once their CRC is checked
    terms = np.arange(corpus.n_terms)
    np.testing.assert_array_equal(loaded.p_w_d(terms), m.p_w_d(terms))
    np.testing.assert_array_equal(loaded.p_w_d_per_sample(terms[:5]), m.p_w_d_per_sample(terms[:5]))
    np.testing.assert_array_equal(loaded.p_w_d_rows(terms[:6], [0, 5, 7]), m.p_w_d_rows(terms[:6], [0, 5, 7]))
    # a private mapping: writing an array leaves the file as it was
    loaded.kd_count_[0] += 1
    assert LDA.load(path).kd_count_[0] == m.kd_count_[0]


def test_small_members_and_checkpoints_are_read(saved):
    corpus, m, path = saved
    assert ck.MAP_BYTES == 1 << 20
    loaded = LDA.load(path)
    assert not any(ck.is_mapped(getattr(loaded, n + "_")) for n in LDA._INFERENCE_ARRAYS)


def test_release_drops_only_whole_pages_of_mapped_arrays(saved, monkeypatch):
    _, m, path = saved
    monkeypatch.setattr(ck, "MAP_BYTES", 1)
    a = ck.read_model_file(path).arrays["kd_doc"]
    before = a.copy()
    ck.release(a, 0, len(a))
    np.testing.assert_array_equal(a, before)  # read again from the file
    plain = before.copy()
    ck.release(plain, 0, len(plain))  # not mapped: left as it is
    np.testing.assert_array_equal(plain, before)


def test_row_chunks_cover_the_rows_in_order(monkeypatch):
    monkeypatch.setattr(ck, "PASS_BYTES", 80)
    starts = np.array([0, 4, 4, 30, 31, 50])
    stops = np.array([4, 4, 30, 31, 50, 52])
    chunks = ck.row_chunks(starts, stops, 8)  # 10 entries a chunk
    assert chunks == [(0, 2), (2, 3), (3, 4), (4, 5), (5, 6)]  # a longer row alone
    assert ck.row_chunks(starts, stops, 8, min_rows=4) == [(0, 4), (4, 6)]
    assert ck.row_chunks(starts[:0], stops[:0], 8) == []


def test_doc_ranges_and_pieces_cover_the_entries_in_order(monkeypatch):
    monkeypatch.setattr(ck, "PASS_BYTES", 80)
    ptr = np.array([[0, 3, 3, 10, 12], [12, 14, 20, 21, 30]])  # 2 samples' rows of 4 documents
    a, b = np.arange(30, dtype=np.int32), np.arange(30, dtype=np.int64)  # 12 bytes an entry
    # the documents hold 5, 6, 8 and 11 entries of the two samples together; 6 a range
    assert list(ck.doc_ranges(ptr, (a, b))) == [(0, 1), (1, 2), (2, 3), (3, 4)]
    assert list(ck.doc_ranges(ptr, (a, b), min_docs=2)) == [(0, 2), (2, 4)]
    got = list(ck.pieces(a, b))
    assert [len(x) for x, _ in got] == [6, 6, 6, 6, 6]
    np.testing.assert_array_equal(np.concatenate([x for x, _ in got]), a)
    np.testing.assert_array_equal(np.concatenate([y for _, y in got]), b)


def test_mapped_checks_read_a_piece_at_a_time(saved, monkeypatch):
    """An index or count check of a mapped array takes its extremes a piece at a time, each
    piece released after it (models/common/validate.py): the same answer as the whole array's."""
    from models.common import validate as V

    _, m, path = saved
    monkeypatch.setattr(ck, "MAP_BYTES", 1)
    monkeypatch.setattr(ck, "PASS_BYTES", 64)
    a = ck.read_model_file(path).arrays["kd_doc"]
    seen = []
    monkeypatch.setattr(ck, "release", lambda x, lo, hi: seen.append((lo, hi)))
    assert V.extrema(a) == (m.kd_doc_.min(), m.kd_doc_.max())
    assert seen == [(lo, min(len(a), lo + 16)) for lo in range(0, len(a), 16)]
    assert V.extrema(m.kd_doc_) == (m.kd_doc_.min(), m.kd_doc_.max()) and len(seen) == -(-len(a) // 16)


def _member_offset(path, name):
    import zipfile

    with zipfile.ZipFile(path) as z:
        return z.getinfo(name + ".npy").header_offset


def test_a_damaged_float_member_is_refused_by_its_crc_in_one_line(saved, tmp_path, monkeypatch):
    """No total cross-checks a float: a byte of a mapped one changed fails its zip CRC, which
    the mapping checks a piece at a time, each piece released after it."""
    corpus, m, path = saved
    monkeypatch.setattr(ck, "MAP_BYTES", 1)
    monkeypatch.setattr(ck, "PASS_BYTES", 64)
    data = bytearray(path.read_bytes())
    at = _member_offset(path, "alpha_samples")
    start = data.index(b"\n", data.index(b"{", at)) + 1
    value = m.alpha_samples_.ravel()[3]
    assert bytes(data[start + 24:start + 32]) == np.float64(value).tobytes()
    data[start + 24:start + 32] = np.float64(value * 1.5).tobytes()  # still a valid prior
    bad = tmp_path / "bad.npz"
    bad.write_bytes(bytes(data))
    released = []
    monkeypatch.setattr(ck, "release", lambda a, lo, hi: released.append(hi - lo))
    with pytest.raises(ValueError) as e:
        LDA.load(bad, fingerprint=corpus.fingerprint)
    want = f"{bad}: not a topicir model file, or truncated/corrupt: entry 'alpha_samples' cannot be read"
    assert str(e.value).startswith(want) and "Bad CRC-32" in str(e.value) and "\n" not in str(e.value)
    assert released and max(released) <= 64


@pytest.mark.parametrize("where", ["local header", "array header", "count"])
def test_damaged_mapped_member_is_one_line_naming_the_file(saved, tmp_path, monkeypatch, where):
    corpus, m, path = saved
    monkeypatch.setattr(ck, "MAP_BYTES", 1)
    data = bytearray(path.read_bytes())
    at = _member_offset(path, "kd_count")
    if where == "local header":
        data[at:at + 4] = b"XXXX"
        want = f"{tmp_path / 'bad.npz'}: not a topicir model file, or truncated/corrupt: entry 'kd_count' cannot be read"
    elif where == "array header":
        start = data.index(b"'shape': (", at) + len(b"'shape': (")
        data[start] = ord("9")  # more entries than the member holds
        want = f"{tmp_path / 'bad.npz'}: not a topicir model file, or truncated/corrupt: entry 'kd_count' cannot be read"
    else:  # a count in the mapped data, past the zip CRC that is not read
        first = np.flatnonzero(m.kd_count_ > 0)[0]
        value = np.int32(m.kd_count_[first]).tobytes()
        start = data.index(b"\n", data.index(b"{", at)) + 1 + 4 * first
        assert bytes(data[start:start + 4]) == value
        data[start:start + 4] = np.int32(-1).tobytes()
        want = f"{tmp_path / 'bad.npz'}: kd_count holds -1, a negative count"
    bad = tmp_path / "bad.npz"
    bad.write_bytes(bytes(data))
    with pytest.raises(ValueError) as e:
        LDA.load(bad, fingerprint=corpus.fingerprint)
    assert str(e.value).startswith(want) and "\n" not in str(e.value)


# A model file of D documents, K topics and S samples from random (doc, term, topic) tokens,
# consistent as a trained one is (its tables' totals agree), without training.
_WRITE = """
import numpy as np
from models import LDA
from models.common.gibbs import stack_ptrs

def model_file(path, D, V, K, S, tokens, seed=0):
    rng = np.random.default_rng(seed)
    doc = np.sort(rng.integers(0, D, tokens))
    doc_len = np.bincount(doc, minlength=D).astype(np.int64)
    term = rng.integers(0, V, tokens)
    kd, tw, n_k = ([], [], []), ([], [], []), []
    for s in range(S):
        topic = rng.integers(0, K, tokens)
        for key, n_rows, n_cols, out in ((topic * D + doc, K, D, kd), (term * K + topic, V, K, tw)):
            u, c = np.unique(key, return_counts=True)
            out[0].append(np.searchsorted(u // n_cols, np.arange(n_rows + 1)).astype(np.int64))
            out[1].append((u % n_cols).astype(np.int32 if n_cols == D else np.uint16))
            out[2].append(c.astype(np.int32))
        n_k.append(np.bincount(topic, minlength=K))
    m = LDA(n_topics=K, n_chains=S, n_iter=1, burn_in=0, sample_every=1)
    m.fingerprint_, m.n_terms_, m.n_iter_, m.n_samples_ = "generated", V, 1, 1
    m.sample_iter_, m._log_lik_rows, m._log_lik_iters = np.array([1]), [], []
    m.doc_len_ = doc_len
    m._set_inference_arrays(*kd, *tw, n_k=np.array(n_k), alpha=np.full((S, K), 0.1))
    m.save(path)
    return doc_len
"""

_MEASURE = """
import json, sys
import numpy as np
from models import LDA
from models.common import checkpoint as ck
ck.PASS_BYTES = 1 << 22

def grown(step):
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak resident set is reset to the current one
    def hwm():
        return int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1]) << 10
    base = hwm()
    result = step()
    return result, hwm() - base

small, big = sys.argv[1:3]
terms = np.arange(0, 2000, 100)
LDA.load(small).p_w_d(terms)  # kernels compiled or loaded from numba's cache first
m, load = grown(lambda: LDA.load(big))
_, rank = grown(lambda: m.p_w_d(terms))
json.dump(dict(load=load, rank=rank, chunk=int(np.diff(m.kd_ptr_[:, [0, -1]]).max()) * 8), sys.stdout)
"""


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux's peak-memory reset")
def test_loading_and_ranking_hold_a_chunk_of_the_file_not_the_file(tmp_path):
    """Loading a model file of 8 samples grows the process by far less than the file (mapped,
    checked a sample at a time); its first p_w_d by the postings' uint16 copy (half the
    document tables) and a sample's pages of them at a time, not the tables."""
    env = {"PYTHONPATH": str(ROOT), "NUMBA_NUM_THREADS": "1"}  # a chunk of one sample
    script = _WRITE + textwrap.dedent("""
        import sys
        model_file(sys.argv[1], 100, 2000, 8, 2, 1000, seed=1)
        model_file(sys.argv[2], 40_000, 2000, 400, 8, 1_000_000)
    """)
    small, big = tmp_path / "small.npz", tmp_path / "big.npz"
    subprocess.run([sys.executable, "-c", script, str(small), str(big)], check=True, env=env, cwd=ROOT)
    with np.load(big) as z:
        kd_bytes = z["kd_doc"].nbytes + z["kd_count"].nbytes
    size = big.stat().st_size
    assert kd_bytes > 48 << 20
    out = subprocess.run([sys.executable, "-c", _MEASURE, str(small), str(big)], check=True,
                         env=env, cwd=ROOT, capture_output=True, text=True).stdout
    grown = json.loads(out)
    table = 20 * 40_000 * 8
    assert grown["load"] < 0.2 * size, (grown, size)
    assert grown["rank"] < kd_bytes // 2 + 2 * grown["chunk"] + 2 * table + (8 << 20), (grown, kd_bytes)
