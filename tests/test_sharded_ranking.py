"""Sharded indexes: `topicir index --shards` builds contiguous slices whose rows and combined
statistics are a single index's, and a batch over the shards (in-process, or on Ray workers)
writes the single index's run file byte for byte, with QL and with a topic model; damaged
manifests and unsupported combinations are one line each."""
import contextlib
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from models.registry import model_class
from retrieval.core.index import Index, build_index
from retrieval.core.modelfiles import load_model, train_model
from retrieval.core.ranking import sweep_topics
from retrieval.core.sharded_ranking import run_sharded, sweep_sharded
from retrieval.core.shards import ShardedIndex, build_shards, combine, open_shard, shard_terms
from retrieval.core.sources import load_topics
from retrieval.ui.cli import main

# topic 5 is only stopwords: both rankings warn of it (one test checks that the sharded one does)
pytestmark = pytest.mark.filterwarnings("ignore:topic 5:UserWarning")

WORDS = ("wing flow shock boundary layer heat transfer pressure plate cone supersonic jet nozzle "
         "turbulent laminar wake vortex blade engine stress panel buckling cylinder shell").split()
TOPICS = {"1": "boundary layer heat", "2": "shock wave cone", "3": "turbulent jet nozzle noise",
          "4": "panel buckling stress", "5": "the of and", "6": "unicorn wake", "7": "vortex vortex blade"}


def _doc(docno: str, text: str) -> str:
    return f"<DOC>\n<DOCNO> {docno} </DOCNO>\n<TEXT>\n{text}\n</TEXT>\n</DOC>\n"


def write_collection(folder: Path) -> tuple[Path, Path]:
    """50 documents of seeded random words, with what a split must get right: a document
    without text (left out), one of stopwords only (an empty row), the same text in the first
    and the last shard (tied scores, broken by row), and a term only the last documents have."""
    rng = np.random.default_rng(7)
    docs = []
    for i in range(50):
        text = " ".join(rng.choice(WORDS, size=rng.integers(5, 40)))
        if i == 3:
            text = "boundary layer heat transfer plate"
        if i == 47:
            text = "boundary layer heat transfer plate"
        if i == 17:
            text = ""
        if i == 30:
            text = "the of and a an"
        if i >= 46:
            text += " unicorn"
        docs.append(_doc(f"D{i:03d}", text))
    (folder / "docs.trec").write_text("".join(docs))
    (folder / "topics.trec").write_text("".join(f"<top>\n<num> Number: {q}\n<title> {t}\n</top>\n\n"
                                                for q, t in TOPICS.items()))
    return folder / "docs.trec", folder / "topics.trec"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The collection as one index (with a quick LDA) and as 3 shards, and its topics."""
    root = tmp_path_factory.mktemp("sharded")
    docs, topics = write_collection(root)
    with pytest.warns(UserWarning):
        whole = build_index([docs], root / "whole")
    with pytest.warns(UserWarning):
        sharded = build_shards([docs], root / "shards", 3)
    _, model = train_model(whole, "lda", root / "lda.npz", progress=False, **model_class("lda").quick_params)
    return dict(root=root, docs=docs, topics=topics, whole=whole, sharded=sharded, model=model)


def _cli(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["-q", *map(str, argv)])
    return rc, out.getvalue(), err.getvalue()


def test_shards_are_the_single_index_in_slices(built):
    whole, sharded = built["whole"], built["sharded"]
    assert sharded.fingerprint == whole.fingerprint
    shards = [open_shard(s) for s in sharded.shards]
    assert [s.stats.n_docs for s in shards] == [17, 16, 16]  # 49 documents with text, D017 left out
    assert [s.first_doc for s in sharded.shards] == [0, 17, 33]
    assert sum((s.stats.docnos for s in shards), []) == whole.stats.docnos
    rows = np.concatenate([np.asarray(s.stats.doc_len) for s in shards])
    np.testing.assert_array_equal(rows, whole.stats.doc_len)
    collection, ids = combine([shard_terms(s.stats) for s in shards])
    assert collection.terms == whole.stats.terms
    np.testing.assert_array_equal(collection.cf, whole.stats.cf)
    assert collection.p_c.tobytes() == whole.stats.p_c.tobytes()
    assert [collection.terms[i] for i in ids[2]] == shards[2].stats.terms
    assert "unicorn" in shards[2].stats.terms and "unicorn" not in shards[0].stats.terms


def test_ql_and_model_runs_are_the_single_index_runs(built):
    whole, sharded, topics = built["whole"], built["sharded"], load_topics(built["topics"])
    model = load_model(built["model"], whole)
    for depth in (1000, 4):
        settings = [(1000.0, 1.0), (50.0, 1.0)]
        want = sweep_topics(whole, topics, settings, depth=depth, progress=False)
        with pytest.warns(UserWarning, match="topic 5"):
            got = sweep_sharded(sharded, topics, settings, depth=depth, progress=False)
        assert got == want
        settings = [(1000.0, 0.7), (300.0, 0.2), (1000.0, 1.0)]
        want = sweep_topics(whole, topics, settings, model=model, depth=depth, progress=False)
        assert sweep_sharded(sharded.path, topics, settings, model=built["model"], depth=depth,
                             progress=False) == want
    run = run_sharded(sharded, topics, progress=False)
    ranking = [d.docno for d in run if d.qid == "1"]
    assert ranking.index("D003") == ranking.index("D047") - 1  # tied across shards: the lower row first


def test_cli_run_files_are_byte_identical(built, tmp_path):
    root, topics = built["root"], built["topics"]
    for extra in ([], ["--model", built["model"], "--lam", "0.6"]):
        assert _cli("run", "--index", root / "whole", "--topics", topics, "--out", tmp_path / "one.txt", *extra)[0] == 0
        rc, out, err = _cli("run", "--index", root / "shards", "--topics", topics, "--out", tmp_path / "shards.txt",
                            *extra)
        assert rc == 0, err
        assert out.strip() == str(tmp_path / "shards.txt")
        assert (tmp_path / "shards.txt").read_bytes() == (tmp_path / "one.txt").read_bytes()
    settings = json.loads((tmp_path / "shards.txt.json").read_text())
    assert settings["fingerprint"] == built["whole"].fingerprint and settings["lam"] == 0.6


@pytest.fixture(scope="module")
def ray_cluster():
    pytest.importorskip("ray")
    from models.common.executors.signals import init_ray, shutdown_ray

    init_ray(num_cpus=2, log_to_driver=False, include_dashboard=False)
    yield
    shutdown_ray()


@pytest.mark.long  # a Ray cluster's start and a run on its workers: minutes (make test-long)
def test_ray_workers_write_the_same_run(built, ray_cluster, tmp_path):
    root, topics = built["root"], built["topics"]
    args = ["--topics", topics, "--model", built["model"], "--lam", "0.5,0.8", "--out-dir"]
    assert _cli("run", "--index", root / "whole", *args, tmp_path / "one")[0] == 0
    rc, out, err = _cli("run", "--index", root / "shards", *args, tmp_path / "ray", "--ray", "--workers", "2")
    assert rc == 0, err
    assert len(out.split()) == 2
    for path in sorted((tmp_path / "one").glob("*.txt")):
        ray_run = tmp_path / "ray" / path.name.replace("run.whole.", "run.shards.")
        assert ray_run.read_bytes() == path.read_bytes()
    # a worker's own failure (a shard replaced by another index) comes back as its one line
    broken = root / "broken"
    shutil.copytree(root / "shards", broken)
    shutil.rmtree(broken / "shard-001")
    shutil.copytree(root / "shards" / "shard-002", broken / "shard-001")
    rc, _, err = _cli("run", "--index", broken, "--topics", topics, "--out", tmp_path / "x.txt", "--ray")
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert f"{broken / 'shard-001'}: fingerprint" in err and "lists it with" in err


@pytest.mark.parametrize("damage, message", [
    (lambda m: "{not json", "not a readable shard manifest"),
    (lambda m: m | {"format": 9}, "shard manifest format 9"),
    (lambda m: m | {"shards": m["shards"][:2]}, "the shards hold 33 documents, the manifest says n_docs 49"),
    (lambda m: m | {"shards": [m["shards"][0] | {"path": "../whole"}] + m["shards"][1:]}, "must name a folder"),
    (lambda m: m | {"shards": [m["shards"][1], m["shards"][0], m["shards"][2]]}, "first_doc 17, but"),
    (lambda m: m | {"fingerprint": "0123456789abcdef"}, "combine to fingerprint"),
])
def test_a_damaged_manifest_is_one_line_naming_it(built, tmp_path, damage, message):
    root = tmp_path / "shards"
    shutil.copytree(built["root"] / "shards", root)
    file = root / "topicir-shards.json"
    changed = damage(json.loads(file.read_text()))
    file.write_text(changed if isinstance(changed, str) else json.dumps(changed))
    rc, _, err = _cli("run", "--index", root, "--topics", built["topics"], "--out", tmp_path / "r.txt")
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{file}: " in err and message in err
    assert not (tmp_path / "r.txt").exists()


def test_a_missing_manifest_or_shard_is_named(built, tmp_path):
    root = tmp_path / "shards"
    shutil.copytree(built["root"] / "shards", root)
    shutil.rmtree(root / "shard-002")
    rc, _, err = _cli("run", "--index", root, "--topics", built["topics"], "--out", tmp_path / "r.txt")
    assert rc == 2 and f"{root / 'shard-002'}: not a topicir index" in err
    (root / "topicir-shards.json").unlink()
    with pytest.raises(FileNotFoundError, match="topicir-shards.json is missing"):
        ShardedIndex(root)


def test_what_a_sharded_index_refuses(built, tmp_path):
    root, topics = built["root"], built["topics"]
    run = ["run", "--index", root / "shards", "--topics", topics, "--out", tmp_path / "r.txt"]
    cases = [
        (run + ["--baseline", "bm25"], "--baseline needs one index"),
        (run + ["--feedback", "rm3"], "--feedback needs one index"),
        (run + ["--workers", "2"], "--workers sets the Ray workers: give --ray too"),
        (["run", "--index", root / "whole", "--topics", topics, "--ray"], "--ray and --workers rank a sharded index"),
        (["train", "lda", "--index", root / "shards"], "a sharded index (topicir index --shards)"),
        (["index", built["docs"], "--index", root / "whole", "--add", "--shards", "2"], "--shards builds a new"),
        (["index", built["docs"], "--out", root / "shards", "--shards", "2"], "already exists"),
        (["index", built["docs"], "--out", tmp_path / "many", "--shards", "60"], "only 49 documents"),
    ]
    for argv, message in cases:
        rc, _, err = _cli(*argv)
        assert rc == 2 and len(err.strip().splitlines()) == 1 and message in err, (argv, err)
    with pytest.raises(ValueError, match="executor must be"):
        run_sharded(built["sharded"], load_topics(topics), executor="spark", progress=False)
    with pytest.raises(ValueError, match="n_workers sets the Ray workers"):
        run_sharded(built["sharded"], load_topics(topics), n_workers=2, progress=False)
    # a model of other documents: its file and both fingerprints
    small = build_shards([Path(__file__).parent / "data" / "docs.trec"], tmp_path / "small", 2)
    with pytest.raises(ValueError, match=f"lda.npz: trained on the index with fingerprint {built['whole'].fingerprint}"):
        run_sharded(small, load_topics(topics), model=built["model"], progress=False)
    assert small.fingerprint == Index(build_index([Path(__file__).parent / "data" / "docs.trec"],
                                                  tmp_path / "small-whole").path).fingerprint


def test_force_rebuilds_a_sharded_index_in_place(built, tmp_path):
    with pytest.warns(UserWarning):
        first = build_shards([built["docs"]], tmp_path / "s", 2)
    with pytest.warns(UserWarning):
        again = build_shards([built["docs"]], tmp_path / "s", 4, force=True)
    assert again.fingerprint == first.fingerprint == built["whole"].fingerprint
    assert [s.n_docs for s in again.shards] == [13, 12, 12, 12]
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == [
        "shard-000", "shard-001", "shard-002", "shard-003", "topicir-shards.json"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
