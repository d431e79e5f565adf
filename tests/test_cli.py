"""The topicir command end to end on the 4-document fixture: index, run, eval, errors."""
from pathlib import Path

import pytest

from retrieval.ui.cli import main
from retrieval.core.trec import read_run

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "ap-mini"
    assert main(["-q", "index", str(DATA / "docs.trec"), "--out", str(out)]) == 0
    return out


def test_run_and_eval(index_dir, tmp_path, capsys):
    run_file = tmp_path / "ql.txt"
    assert main(["-q", "run", "--index", str(index_dir), "--topics", str(DATA / "topics.trec"),
                 "--out", str(run_file)]) == 0
    run = read_run(run_file)
    by_topic = {}
    for r in run:
        by_topic.setdefault(r.qid, []).append(r.docno)
    # "Airbus Subsidies": the two Airbus stories first; "Rail Strikes": the rail story first.
    assert set(by_topic["1"][:2]) == {"AP880212-0001", "AP880212-0002"}
    assert by_topic["2"][0] == "AP880212-0003"
    capsys.readouterr()
    assert main(["eval", str(run_file), "--qrels", str(DATA / "qrels.txt"), "--measures", "MAP", "P@10"]) == 0
    out = capsys.readouterr().out
    assert "ql.txt" in out and "1.0000" in out  # both topics rank their relevant docs first: MAP 1


def test_sweep_writes_one_run_per_setting(index_dir, tmp_path, capsys):
    assert main(["-q", "run", "--index", str(index_dir), "--topics", str(DATA / "topics.trec"),
                 "--mu", "100,1000", "--out-dir", str(tmp_path)]) == 0
    names = sorted(p.name for p in tmp_path.iterdir() if p.suffix != ".json")
    assert names == ["run.ap-mini.topics.title.ql.mu100.txt", "run.ap-mini.topics.title.ql.mu1000.txt"]


def test_baseline_run(index_dir, tmp_path):
    out = tmp_path / "bm25.txt"
    assert main(["-q", "run", "--index", str(index_dir), "--topics", str(DATA / "topics.trec"),
                 "--baseline", "bm25", "--out", str(out)]) == 0
    run = read_run(out)
    by_topic = {q: [r for r in run if r.qid == q] for q in ("1", "2")}
    # BM25 returns only matching documents, best first: topic 1 "Airbus Subsidies" matches the two
    # Airbus stories (3 mentions of each term before 1), topic 2 "Rail Strikes" the rail story first
    assert [r.docno for r in by_topic["1"]] == ["AP880212-0001", "AP880212-0002"]
    assert by_topic["1"][0].score > by_topic["1"][1].score > 0
    assert by_topic["2"][0].docno == "AP880212-0003"


def test_bad_input_exits_2_with_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.trec"
    bad.write_text("<DOC>\n<DOCNO> X1 </DOCNO>\n<TEXT>one</TEXT>\n<DOC>\n")
    assert main(["-q", "index", str(bad), "--out", str(tmp_path / "idx")]) == 2
    err = capsys.readouterr().err
    assert "bad.trec:1" in err and "error" in err
    assert main(["-q", "run", "--index", str(tmp_path / "nothing"), "--topics", str(DATA / "topics.trec")]) == 2
    assert "not a topicir index" in capsys.readouterr().err


def test_qrels_with_unknown_topics_warn(index_dir, tmp_path):
    from retrieval.core.evaluate import check_topics
    from retrieval.core.trec import read_qrels

    with pytest.warns(UserWarning, match=r"qrels.txt: 1 judged topics are not in the topics: 2"):
        check_topics(read_qrels(DATA / "qrels.txt"), ["1"], "qrels.txt")
