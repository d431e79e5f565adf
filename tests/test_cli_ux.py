"""Small UX guarantees of the topicir command (issue 13): topic counts in eval, one QLD run name,
-q without progress bars, the R@1000 note."""
from pathlib import Path

import pytest

from retrieval.ui.cli import main

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ux") / "ap-mini"
    assert main(["-q", "index", str(DATA / "docs.trec"), "--out", str(out)]) == 0
    return out


def test_eval_says_how_many_topics_each_mean_is_over(index_dir, tmp_path, capsys):
    run_file = tmp_path / "ql.txt"
    # only topic 2 ranked: qrels judge topics 1 and 2, so the means are over 2 topics, 1 ranked
    topics = tmp_path / "t.tsv"
    topics.write_text("2\trail strikes\n")
    assert main(["-q", "run", "--index", str(index_dir), "--topics", str(topics), "--out", str(run_file)]) == 0
    capsys.readouterr()
    with pytest.warns(UserWarning, match="1 judged topics have no results"):
        assert main(["eval", str(run_file), "--qrels", str(DATA / "qrels.txt"), "--measures", "MAP", "R@1000"]) == 0
    out = capsys.readouterr().out
    assert "means over the 2 judged topics" in out
    row = next(line for line in out.splitlines() if line.startswith("ql.txt")).split()
    assert row == ["ql.txt", "0.5000", "0.5000", "2", "1"]  # topic 1 counts 0
    assert "R@1000: exact QL" in out
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    assert "judged topics" in capsys.readouterr().out


def test_qld_run_has_the_name_compare_gives_it(index_dir, tmp_path):
    assert main(["-q", "run", "--index", str(index_dir), "--topics", str(DATA / "topics.trec"),
                 "--baseline", "qld", "--out-dir", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [  # the run and its settings
        "run.ap-mini.topics.title.qld.mu1000.txt", "run.ap-mini.topics.title.qld.mu1000.txt.json"]


def test_quiet_hides_progress_bars(index_dir, tmp_path, capsys):
    args = ["run", "--index", str(index_dir), "--topics", str(DATA / "topics.trec"), "--out-dir", str(tmp_path)]
    assert main(args) == 0
    assert "ranking topics" in capsys.readouterr().err
    assert main(["-q", *args]) == 0
    assert capsys.readouterr().err == ""
    from tqdm import tqdm

    assert not tqdm(range(1), disable=False).disable  # bars come back after the command


@pytest.mark.parametrize("kind", ["lda", "pam", "avipam"])
def test_train_help_reads_as_plain_text(kind, capsys):
    """Docstring markup (roles, double backquotes) does not reach the terminal."""
    with pytest.raises(SystemExit):
        main(["train", kind, "--help"])
    out = capsys.readouterr().out
    assert "--threads" in out and "`" not in out and ":func:" not in out and ":meth:" not in out


def test_train_without_a_kind_names_the_kinds_not_parser_internals(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["train"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "required: KIND, OPTIONS" in err and "rest" not in err
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert "the model kind: lda, pam, tcm, glda, avipam, tree-lda" in capsys.readouterr().out


# -- issue 59 -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ql_run(index_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ux-run") / "ql.txt"
    assert main(["-q", "run", "--index", str(index_dir), "--topics", str(DATA / "topics.trec"), "--out", str(out)]) == 0
    return out


def test_eval_takes_runs_after_the_measures_and_trec_eval_names(ql_run, tmp_path, capsys):
    other = tmp_path / "other.txt"
    other.write_text("1 Q0 AP880212-0003 1 2.0 x\n1 Q0 AP880212-0001 2 1.0 x\n")
    capsys.readouterr()
    with pytest.warns(UserWarning, match="1 judged topics have no results"):
        assert main(["eval", "--qrels", str(DATA / "qrels.txt"), "--measures", "AP", "P@10", str(ql_run), str(other)]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.startswith(("ql.txt", "other.txt"))]
    assert rows == [["ql.txt", "1.0000", "0.1500", "2", "2"], ["other.txt", "0.1250", "0.0500", "2", "1"]]  # topic 1: AP 1/2 of 2 relevant; 2 counts 0
    assert main(["eval", str(ql_run), "--qrels", str(DATA / "qrels.txt"), "--measures", "map", "ndcg_cut_10",
                 "P_10", "--per-topic"]) == 0
    out = capsys.readouterr().out
    per_topic, means = out.split("qrels:")
    assert per_topic.splitlines()[1].split() == ["topic", "AP", "nDCG@10", "P@10"]  # a topic's AP is no mean
    assert means.splitlines()[1].split() == ["run", "MAP", "nDCG@10", "P@10", "topics", "ranked"]


@pytest.mark.parametrize("argv, message", [
    (["--measures", "AP", "P@10"], "the following arguments are required: RUN"),
    (["--measures", "bogus", "r.txt"], "argument --measures: unknown measure 'bogus'"),
])
def test_eval_refuses_no_run_or_an_unknown_measure(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["eval", "--qrels", str(DATA / "qrels.txt"), *argv])
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_compare_writes_its_runs_into_out_dir_tagged_with_their_settings(index_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["-q", "compare", "--index", str(index_dir), "--topics", str(DATA / "topics.trec"), "--qrels",
                 str(DATA / "qrels.txt"), "--methods", "ql", "bm25", "--mu", "500", "--out-dir", "mine"]) == 0
    assert not (tmp_path / "topics_runs").exists()
    runs = sorted((tmp_path / "mine").glob("*.txt"))
    assert [p.name for p in runs] == ["run.ap-mini.topics.title.bm25.txt", "run.ap-mini.topics.title.ql.mu500.txt"]
    assert [{r.split()[-1] for r in p.read_text().splitlines()} for p in runs] == [{"topicir-bm25"}, {"topicir-ql.mu500"}]


def test_run_tags_say_the_settings_of_every_run_of_a_sweep(index_dir, tmp_path):
    from retrieval.core.index import Index
    from retrieval.core.modelfiles import train_model

    _, model = train_model(Index(index_dir), "lda", tmp_path / "lda.npz", progress=False, n_topics=2, n_chains=1,
                           n_iter=4, burn_in=2, sample_every=1)
    assert main(["-q", "run", "--index", str(index_dir), "--topics", str(DATA / "topics.trec"), "--model", str(model),
                 "--lam", "0.5,0.7", "--out-dir", str(tmp_path / "runs")]) == 0
    tags = {p.name: {line.split()[-1] for line in p.read_text().splitlines()} for p in (tmp_path / "runs").glob("*.txt")}
    assert tags == {"run.ap-mini.topics.title.lda.mu1000_lam0.5.txt": {"topicir-lda.mu1000_lam0.5"},
                    "run.ap-mini.topics.title.lda.mu1000_lam0.7.txt": {"topicir-lda.mu1000_lam0.7"}}


@pytest.mark.parametrize("kind, params, warned", [
    ("lda", dict(n_topics=9), "LDA with 9 topics on 4 documents (more topics than documents)"),
    ("pam", dict(n_super=2, n_sub=6), "PAM with 6 topics on 4 documents (more topics than documents)"),
    ("lda", dict(n_topics=4), None),
])
def test_training_says_when_there_are_more_topics_than_documents(index_dir, tmp_path, caplog, kind, params, warned):
    from retrieval.core.index import Index
    from retrieval.core.modelfiles import train_model

    with caplog.at_level("WARNING", logger="retrieval.core.modelfiles"):
        train_model(Index(index_dir), kind, tmp_path / "m.npz", progress=False, n_chains=1, n_iter=2, burn_in=1,
                    **params)
    said = [r.getMessage() for r in caplog.records if "more topics than documents" in r.getMessage()]
    assert [m.split(":")[0] for m in said] == ([warned] if warned else [])


def test_bad_topics_manifest_and_depth_are_named(index_dir, tmp_path, capsys):
    topics = tmp_path / "binary.dat"
    topics.write_bytes(b"7\tairbus\n1\x0b2\tfoo bar\n")
    args = ["-q", "run", "--index", str(index_dir), "--out-dir", str(tmp_path / "runs")]
    assert main(args + ["--topics", str(topics)]) == 2
    assert capsys.readouterr().err == (f"topicir run: error: {topics}:2: topic id '1\\x0b2' holds whitespace; "
                                       f"is this a topics file?\n")
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(index_dir, broken)
    manifest = broken / "topicir.json"
    manifest.write_text(manifest.read_text()[:1] + "\n")  # truncated
    assert main(["-q", "run", "--index", str(broken), "--topics", str(DATA / "topics.trec")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"topicir run: error: {manifest}: not a readable index manifest (Expecting ")
    assert err.count("\n") == 1
    with pytest.raises(SystemExit) as exc:
        main(args + ["--topics", str(DATA / "topics.trec"), "--depth", "-5"])
    assert exc.value.code == 2 and "argument --depth: expected an integer >= 1, got '-5'" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()
