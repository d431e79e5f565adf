"""`topicir bench peers`: topicir against tomotopy on an index's corpus (issue 61, item 5)."""
import re

import pytest

from retrieval.ui.cli import main

pytest.importorskip("tomotopy")


def _rows(text):
    return [line.split("|")[1:-1] for line in text.splitlines() if re.match(r"^\| (LDA|PAM) ", line)]


def test_peers_rank_both_samplers_on_the_index_corpus(med_index, tmp_path, capsys):
    out = tmp_path / "peers.md"
    argv = ["-q", "bench", "peers", "--index", str(med_index.path), "--k", "8", "--iters", "3",
            "--tomotopy-iters", "2", "--pam-sizes", "3,6", "4,8", "--pam-every", "1", "3",
            "--pam-iters", "3", "--pam-tomotopy-iters", "1", "--write", str(out)]
    assert main(argv) == 0
    text = out.read_text()
    assert "Command: `topicir -q bench peers --index" in text
    rows = _rows(text)
    assert [(r[0].strip(), r[1].strip()) for r in rows] == [("LDA", "K=8"), ("PAM", "3,6"), ("PAM", "4,8")]
    head = [h.strip() for h in text.split("\n| model")[1].splitlines()[0].split("|")[1:-1]]
    speed = head.index("topicir / tomotopy speed") + 1
    whole = head.index("speed, whole run") + 1
    start = head.index("start + first sweep s topicir / tomotopy") + 1
    for r in rows:
        assert float(r[speed]) > 0
    assert float(rows[0][whole]) > 0 and all(float(v) > 0 for v in rows[0][start].split(" / "))
    # every 3rd document: a third of the collection's documents (rounded up)
    docs = [int(r[2].split(" docs")[0].replace(",", "")) for r in rows]
    assert docs[2] == -(-docs[0] // 3) and docs[1] == docs[0]
    assert "(every 3-th document)" in rows[2][2]
    assert "ll/token" in text and capsys.readouterr().out.strip()


def test_peers_time_lda_by_its_sweeps_after_the_first(med_index, capsys):
    assert main(["-q", "bench", "peers", "--index", str(med_index.path), "--kinds", "lda", "--iters", "1"]) != 0
    assert "--iters and --tomotopy-iters must be >= 2, got 1 and 10" in capsys.readouterr().err


def test_peers_want_one_every_per_pam_size(med_index, capsys):
    assert main(["-q", "bench", "peers", "--index", str(med_index.path), "--kinds", "pam",
                 "--pam-sizes", "3,6", "4,8", "--pam-every", "1"]) != 0
    assert "--pam-every needs one value per --pam-sizes pair" in capsys.readouterr().err
