"""The query console on the 4-document fixture: Session commands without a terminal, then the
prompt_toolkit loop fed through a pipe."""
import json
from pathlib import Path

import numpy as np
import pytest

from retrieval.core.scoring import explain
from retrieval.ui.console import Session
from retrieval.ui.console_app import plain_loop, repl
from retrieval.ui.console_text import (highlight, match_words, parse_settings, snippet, snippet_window, to_plain,
                                       wrap)
from retrieval.core.index import build_index
from retrieval.core.scoring import Scorer
from retrieval.core.trec import read_qrels, read_run, read_topics

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    return build_index([DATA / "docs.trec"], tmp_path_factory.mktemp("console") / "ap-mini")


class FakeModel:
    """Two topics: 0 = aircraft trade (docs 0, 1), 1 = rail and weather (docs 2, 3)."""

    kind = "fake"  # no adapter: the protocol alone

    def __init__(self, stats):
        self.n_topics = 2
        n_w = np.zeros((2, stats.n_terms))
        for d in range(stats.n_docs):
            ids = stats.term_ids[stats.doc_ptr[d]:stats.doc_ptr[d + 1]]
            np.add.at(n_w[0 if d < 2 else 1], ids, 1)
        self.phi = (n_w + 0.01) / (n_w + 0.01).sum(1, keepdims=True)
        self.theta = np.array([[0.9, 0.1], [0.8, 0.2], [0.1, 0.9], [0.3, 0.7]])

    def p_w_d(self, term_ids):
        return self.theta @ self.phi[:, np.asarray(term_ids)]

    def doc_topics(self, doc, top=10):
        ids = np.argsort(-self.theta[doc], kind="stable")[:top]
        return ids, self.theta[doc, ids]

    def topic_words(self, topic, top=10):
        ids = np.argsort(-self.phi[topic], kind="stable")[:top]
        return ids, self.phi[topic, ids]


def text(frags) -> str:
    return to_plain(frags)


def test_query_shows_hits_with_highlighted_snippets(index):
    s = Session(index)
    out = s.execute("Airbus subsidies")
    plain = text(out)
    lines = plain.splitlines()
    assert lines[0].startswith("q1: Airbus subsidies  [airbu subsidi]  mu=1000 QL")
    assert "AP880212-0001" in lines[1] and "Airbus Wins Subsidies From Four Governments" in lines[1]
    assert "*subsidies*" in lines[2] and "*Airbus*" in lines[2]  # snippet of the body, stems matched
    assert ("class:hl", "subsidies") in out
    assert [r.docno for r in s.last.run(index.stats.docnos)][:2] == ["AP880212-0001", "AP880212-0002"]
    assert len(s.last.docs) == 4 and s.results[-1].qid == "q1"
    # The ranking is the one topicir run produces.
    scores = Scorer(index.stats, lam=1.0).score(s.last.query)
    np.testing.assert_array_equal(s.last.scores, scores[s.last.docs])


def test_unknown_terms_and_empty_queries(index):
    s = Session(index)
    assert "empty query" in text(s.execute("   "))
    assert "no indexable words (only stopwords" in text(s.execute("the of and"))
    assert "no term of 'zeppelin' is in ap-mini" in text(s.execute("zeppelin"))
    assert s.results == [] and s.last is None
    out = text(s.execute("zeppelin strike"))
    assert "not in the index (left out): zeppelin" in out
    assert s.last.qid == "q1"  # failed queries use up no query id


def test_why_breakdown_sums_to_the_score(index):
    s = Session(index)
    s.execute("rail strike trains strike")
    out = text(s.execute(":why 1"))
    assert "AP880212-0003 (hit 1)" in out
    rows = explain(index.stats, s.last.query, int(s.last.docs[0]), s.mu, 1.0)
    assert [r.term for r in rows] == ["rail", "strike", "train"] and rows[1].weight == 2 and rows[1].tf == 2
    assert sum(r.score for r in rows) == pytest.approx(s.last.scores[0], rel=1e-12)
    assert f"{s.last.scores[0]:.4f}" in out.split("total")[1]
    # A document that contains none of the terms still gets the smoothed score.
    d = index.stats.doc_index["AP880212-0004"]
    rows = explain(index.stats, s.last.query, d, s.mu, 1.0)
    assert all(r.tf == 0 for r in rows)
    assert sum(r.score for r in rows) == pytest.approx(Scorer(index.stats, lam=1.0).score(s.last.query)[d], rel=1e-12)
    assert "no hit 9" in text(s.execute(":why 9"))


def test_why_with_a_topic_model_matches_the_mixture_kernel(index):
    model = FakeModel(index.stats)
    s = Session(index, model=model, model_name="fake", lam=0.5)
    s.execute("airbus weather")
    scores = Scorer(index.stats, lam=0.5, model=model).score(s.last.query)
    np.testing.assert_allclose(s.last.scores, scores[s.last.docs])
    for d in range(index.stats.n_docs):
        p_tm = model.p_w_d(s.last.query.term_ids)[d]
        rows = explain(index.stats, s.last.query, d, 1000.0, 0.5, p_tm)
        assert sum(r.score for r in rows) == pytest.approx(scores[d], rel=1e-12)
        for r in rows:
            assert r.p == pytest.approx(0.5 * r.p_ql + 0.5 * r.p_tm)
    out = text(s.execute(":why 1"))
    assert "P_TM" in out and "QL share" in out and "top topics of" in out
    assert out.startswith("AP880212-0004 (hit 1)")  # the weather story, through its topic
    assert "topic    1  0.700  " in out and "topic    0  0.300  subsidi airbu" in out
    with pytest.raises(ValueError, match="no P_TM"):
        explain(index.stats, s.last.query, 0, 1000.0, 0.5)


def test_settings_validation(index):
    s = Session(index)
    assert "lam must be in [0, 1]" in text(s.execute(":lam 1.5"))
    assert "lam must be a number, got 'x'" in text(s.execute(":lam x"))
    assert "mu must be > 0" in text(s.execute(":mu 0"))
    assert "mu must be a number" in text(s.execute(":mu -"))
    assert s.lam == 0.7 and s.mu == 1000
    assert "no model loaded" in text(s.execute(":lam 0.5"))
    assert s.lam == 0.5 and s.effective_lam == 1.0
    assert text(s.execute(":mu 2000")) == "mu = 2000\n"
    s.execute("airbus")
    assert s.last.mu == 2000 and s.last.lam == 1.0
    assert "field must be one of title, desc, narr, title+desc" in text(s.execute(":field body"))
    assert "unknown command :lamb; did you mean :lam?" in text(s.execute(":lamb 3"))
    assert "hits must be" in text(s.execute(":hits 0"))
    assert "needs a topic model" in text(s.execute(":topic 1"))
    assert "no such model" in text(s.execute(":model /nonexistent/model"))
    with pytest.raises(ValueError, match="expected settings"):
        parse_settings("beta=2")
    assert parse_settings("mu=500,lam=0") == {"mu": 500.0, "lam": 0.0}


def test_doc_by_hit_number_and_docno(index):
    s = Session(index)
    assert "unknown document 'AP999' in ap-mini" in text(s.execute(":doc AP999"))
    assert "did you mean AP880212-0003?" in text(s.execute(":doc ap880212-0003"))
    out = text(s.execute(":doc AP880212-0003"))
    assert out.startswith("AP880212-0003") and "Rail Strike Halts Trains" in out and "*" not in out
    s.execute("union offer")
    out = text(s.execute(":doc 1"))
    assert "AP880212-0003" in out and "the *union*" in out and "*offer*" in out


def test_topics_field_qrels_and_compare(index):
    s = Session(index, topics=read_topics(DATA / "topics.trec"), qrels=read_qrels(DATA / "qrels.txt"))
    out = text(s.execute("#2"))
    assert out.startswith("2: Rail Strikes") and "AP 1.0000" in out and "  1 R AP880212-0003" in out
    assert "no topic '7'" in text(s.execute("#007"))
    s.execute(":field desc")
    assert text(s.execute("#1")).startswith("1: Document will discuss government subsidies to Airbus.")
    out = text(s.execute(":compare mu=1000 mu=1 airbus boeing"))
    assert "A: mu=1000 QL" in out and "B: mu=1 QL" in out and "top 10 overlap 4/4" in out
    assert "lam has no effect" not in out
    out = text(s.execute(":compare lam=0.7 lam=1"))
    assert "lam has no effect" in out and out.count("=\n") == 4  # the last query, same ranking twice
    assert "usage: :compare" in text(s.execute(":compare airbus"))
    assert [r.qid for r in s.results] == ["2", "1"]  # :compare leaves the session's results alone


def test_compare_lam_with_a_model(index):
    s = Session(index, model=FakeModel(index.stats), model_name="fake")
    out = text(s.execute(":compare lam=0.1 lam=1 airbus"))
    assert "A: mu=1000 lam=0.1 fake" in out and "B: mu=1000 QL" in out
    assert "topic 1 of 2 (fake)" in text(s.execute(":topic 1"))
    assert "topic must be in [0, 2)" in text(s.execute(":topic 2"))


def test_write_run(index, tmp_path):
    s = Session(index, topics=read_topics(DATA / "topics.trec"))
    assert "nothing to write" in text(s.execute(f":write {tmp_path / 'r.txt'}"))
    s.execute("airbus")
    s.execute("#2")
    s.execute(":mu 10")
    s.execute("#2")
    out = text(s.execute(f":write {tmp_path / 'r.txt'}"))
    assert "wrote 2 queries, 8 lines" in out and "1 earlier result(s)" in out
    run = read_run(tmp_path / "r.txt")
    assert [(r.qid, r.docno) for r in run if r.qid == "q1"][0] == ("q1", "AP880212-0001")
    assert {r.qid for r in run} == {"q1", "2"} and len(run) == 8
    assert read_topics(tmp_path / "r.txt.queries.tsv")[1].title == "Rail Strikes"
    settings = json.loads((tmp_path / "r.txt.json").read_text())
    assert settings["source"] == "console" and settings["depth"] == 1000
    assert settings["queries"] == {"q1": {"mu": 1000, "lam": 1.0, "model": None},
                                   "2": {"mu": 10, "lam": 1.0, "model": None}}
    assert "no such directory" in text(s.execute(f":write {tmp_path / 'nodir' / 'r.txt'}"))


def test_snippet_and_highlight_helpers():
    text_ = "The Airbus consortium got subsidies.\n  Boeing said subsidies break rules."
    analyze = {"airbus": ["airbu"], "subsidies": ["subsidi"], "said": ["said"]}.get
    spans = match_words(text_, {"subsidi", "airbu"}, lambda w: analyze(w, [w]))
    assert [text_[a:b] for a, b, hit in spans if hit] == ["Airbus", "subsidies", "subsidies"]
    assert to_plain(highlight(text_, spans)) == text_.replace("Airbus", "*Airbus*").replace("subsidies", "*subsidies*")
    assert to_plain(snippet(text_, spans)) == ("The *Airbus* consortium got *subsidies*. Boeing said "
                                               "*subsidies* break rules")
    wrapped = to_plain(wrap(snippet(text_, spans), 30, "  "))
    assert wrapped == "  The *Airbus* consortium got\n  *subsidies*. Boeing said\n  *subsidies* break rules\n"
    assert all(len(line) <= 30 for line in wrapped.replace("*", "").splitlines())
    words = [(i, i + 1, i in (50, 52)) for i in range(100)]
    assert snippet_window(words, 10) == (47, 57)
    assert snippet_window(words[:5], 10) == (0, 5)


def test_completion(index):
    from prompt_toolkit.document import Document

    from retrieval.ui.console_app import _completer

    s = Session(index, topics=read_topics(DATA / "topics.trec"))

    def complete(text):
        return [c.text for c in _completer(s).get_completions(Document(text), None)]

    assert complete(":wr") == ["write"] and complete(":h") == ["hits", "history", "help"]
    assert complete(":field t") == ["title", "title+desc"]
    assert complete(":compare l") == ["lam="]
    assert complete("#") == ["1", "2"]
    assert complete("airbus") == []
    s.execute("rail")
    assert complete(":doc AP880212-000")[:1] == ["AP880212-0003"]


def test_plain_loop_for_piped_input(index):
    import io

    out = io.StringIO()
    plain_loop(Session(index), ["airbus\n", ":hits 1\n", "rail\n", ":quit\n", "never run\n"], out)
    value = out.getvalue()
    assert "ap-mini> airbus" in value and "hits = 1" in value and "never run" not in value
    assert value.split("ap-mini> rail")[1].count("AP880212-") == 1


def test_repl_through_a_pipe(index, monkeypatch):
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    s = Session(index)
    printed = []
    with create_pipe_input() as inp:
        inp.send_text("airbus\r:why 1\r\x03:lam 9\r")
        inp.send_text("\x04")  # Ctrl-D on an empty line leaves
        assert repl(s, input=inp, output=DummyOutput(), write=lambda f: printed.append(to_plain(f))) == 0
    assert len(printed) == 3
    assert "AP880212-0001" in printed[0] and "total" in printed[1] and "lam must be in [0, 1]" in printed[2]

    def interrupted(line):
        raise KeyboardInterrupt
    monkeypatch.setattr(s, "search", interrupted)
    printed.clear()
    with create_pipe_input() as inp:
        inp.send_text("rail\r:quit\rnot read\r")
        repl(s, input=inp, output=DummyOutput(), write=lambda f: printed.append(to_plain(f)))
    assert printed == ["cancelled\n"] and s.done


def test_cli_console_with_piped_input(index, monkeypatch, capsys, tmp_path):
    import io

    from retrieval.ui.cli import main

    monkeypatch.setattr("sys.stdin", io.StringIO(f"#1\n:why 1\n:write {tmp_path / 'c.txt'}\n"))
    assert main(["-q", "console", "--index", str(index.path), "--topics", str(DATA / "topics.trec"),
                 "--qrels", str(DATA / "qrels.txt"), "--hits", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("topicir console: ap-mini (4 docs, 42 terms), mu=1000 QL")
    assert "1: Airbus Subsidies" in out and "AP 1.0000" in out and "total" in out
    assert [r.qid for r in read_run(tmp_path / "c.txt")] == ["1"] * 4
    assert main(["-q", "console", "--index", str(tmp_path / "none")]) == 2
    assert "not a topicir index" in capsys.readouterr().err


def test_open_session_with_a_model_file(index, tmp_path):
    from retrieval.core.modelfiles import train_model
    from retrieval.ui.console_app import open_session

    model, path = train_model(index, "lda", tmp_path / "lda.npz", progress=False, n_topics=3, n_chains=1,
                              n_iter=4, burn_in=2, sample_every=1)
    session = open_session(index.path, model=str(path), lam=0.5)
    assert session.model_name == "lda" and session.model.n_topics == 3
    out = text(session.execute("airbus subsidies"))
    assert "AP880212" in out and "lam=0.5" in out
    why = text(session.execute(":why 1"))
    assert "P_TM" in why and "top topics of" in why


def test_a_long_typed_or_pasted_line_is_cut_and_memory_stays_bounded(index, monkeypatch):
    """Issue 59: 200 KB typed (or pasted without bracketed paste, every character a key) grew the
    console by the square of the length (prompt_toolkit keeps the line per key for undo) until the
    kernel killed it. The line stops at LINE_LIMIT characters: memory stays flat."""
    import random
    import string
    import tracemalloc

    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from retrieval.ui import console_app

    monkeypatch.setattr(console_app, "LINE_LIMIT", 300)
    s = Session(index)
    seen = []
    monkeypatch.setattr(s, "execute", lambda line: seen.append(line) or [])
    rnd = random.Random(0)
    typed = "".join(rnd.choice(string.ascii_lowercase + " ") for _ in range(3000))
    with create_pipe_input() as inp:  # prompt_toolkit loaded before memory is traced
        inp.send_text("airbus\r\x04")
        repl(s, input=inp, output=DummyOutput(), write=lambda f: None)
    tracemalloc.start()
    try:
        with create_pipe_input() as inp:
            inp.send_text(typed + "\r" + "\x1b[200~" + typed + "\x1b[201~" + "\r\x04")
            repl(s, input=inp, output=DummyOutput(), write=lambda f: None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert seen[1:] == [typed[:300], typed[:300]]  # typed, then pasted: both cut, Enter still works
    assert peak < 6e6, f"{peak / 1e6:.1f} MB for a 3,000-character line (unbounded: 12 MB)"


def test_hits_must_be_a_positive_count(index, capsys):
    from retrieval.ui.cli import main
    from retrieval.ui.console_text import ConsoleError

    with pytest.raises(ConsoleError, match=r"hits must be a whole number in \[1, 1000\], got '-1'"):
        Session(index, hits=-1)
    with pytest.raises(SystemExit) as exc:
        main(["console", "--index", str(index.path), "--hits", "-1"])
    assert exc.value.code == 2 and "argument --hits: expected an integer >= 1, got '-1'" in capsys.readouterr().err
