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
