"""Pseudo-relevance feedback from the product: `topicir run --feedback`, the console's :feedback
and :fb, the PyTerrier retriever's feedback settings and the report's expansions section, each
equal to :func:`retrieval.core.feedback.run_feedback` on a 30-document themed collection."""
import json
from pathlib import Path

import numpy as np
import pytest

from models import registry
from retrieval.core.feedback import Settings, run_feedback
from retrieval.core.runs import expansions_path, read_expansions, read_settings
from retrieval.core.sources import load_topics
from retrieval.core.trec import read_run
from retrieval.ui.cli import main

CAR = "car automobile engine motor vehicle driver road wheel traffic speed".split()
DOCTOR = "doctor physician medicine hospital patient nurse illness disease treatment health".split()
RIVER = "river stream water bank flood lake rain shore boat fish".split()
TOPICS = "1\tengine road\n2\thospital nurse\n3\tflood boat\n"


@pytest.fixture(scope="module")
def coll(tmp_path_factory):
    """30 one-theme documents (car 0-9, doctor 10-19, river 20-29), three topics with qrels, and
    a 3-topic LDA model of them."""
    from retrieval.core.index import build_index
    from retrieval.core.modelfiles import train_model

    root = tmp_path_factory.mktemp("fb-surface")
    rng = np.random.default_rng(1)
    docs, qrels = [], []
    for d in range(30):
        words = [CAR, DOCTOR, RIVER][d // 10]
        text = " ".join(rng.choice(words, size=int(rng.integers(20, 30))))
        docs.append(f"<DOC>\n<DOCNO> F{d:03d} </DOCNO>\n<TEXT>\n{text}.\n</TEXT>\n</DOC>\n")
        qrels.append(f"{d // 10 + 1} 0 F{d:03d} 1\n")
    (root / "docs.trec").write_text("".join(docs))
    (root / "topics.tsv").write_text(TOPICS)
    (root / "qrels.txt").write_text("".join(qrels))
    index = build_index([root / "docs.trec"], root / "index")
    params = dict(registry.model_class("lda").quick_params, n_topics=3, n_iter=60, burn_in=40, sample_every=10)
    model, model_path = train_model(index, "lda", root / "lda.npz", progress=False, checkpoint=False, **params)
    return root, index, model, Path(model_path)


def cli_run(coll, tmp_path, *extra) -> list[Path]:
    root, index, _, _ = coll
    out = tmp_path / "runs"
    rc = main(["-q", "run", "--index", str(index.path), "--topics", str(root / "topics.tsv"),
               "--out-dir", str(out), *extra])
    assert rc == 0
    return sorted(out.glob("*.txt"))


@pytest.mark.parametrize("method, with_model", [("rm3", False), ("rm3", True), ("topics", True)])
def test_run_with_feedback_equals_run_feedback(coll, tmp_path, method, with_model):
    root, index, model, model_path = coll
    extra = ["--model", str(model_path), "--lam", "0.6"] if with_model else []
    topics_flag = ["--fb-topics", "2"] if method == "topics" else []
    [path] = cli_run(coll, tmp_path, *extra, "--feedback", method, "--fb-docs", "5", "--fb-terms", "4",
                     "--fb-weight", "0.4", "--fb-max-df", "0.5", "--fb-length", "3", *topics_flag)
    settings = Settings(method, fb_docs=5, fb_terms=4, original_weight=0.4, fb_max_df=0.5, fb_length=3,
                        **({"fb_topics": 2} if method == "topics" else {}))
    want, expansions = run_feedback(index, load_topics(root / "topics.tsv"), settings,
                                    model=model if with_model else None, mu=1000.0, lam=0.6, progress=False)
    got = read_run(path)
    assert [(r.qid, r.docno) for r in got] == [(r.qid, r.docno) for r in want]
    assert np.allclose([r.score for r in got], [r.score for r in want], rtol=1e-9)
    # the name and the settings file carry the feedback settings
    assert "_prf-" + method + "_fbdocs5_fbterms4" in path.name and "fbw0.4_fblen3" in path.name
    assert "fbmaxdf0.5" in path.name
    assert ("fbtopics2" in path.name) == (method == "topics")
    assert read_settings(path)["feedback"] == settings.as_dict()
    written = read_expansions(expansions_path(path))
    assert written == [json.loads(json.dumps(expansions[q].as_dict())) for q in ("1", "2", "3")]
    assert written[0]["terms"][0][1] >= written[0]["terms"][-1][1] and len(written[0]["docs"]) == 5
    assert bool(written[0]["topics"]) == (method == "topics")


def test_feedback_changes_the_ranking_and_lam_lists_keep_working(coll, tmp_path):
    _, _, _, model_path = coll
    paths = cli_run(coll, tmp_path, "--model", str(model_path), "--lam", "0.5,0.9", "--feedback", "rm3")
    assert [p.name.split(".lda.")[1] for p in paths] == [
        "mu1000_lam0.5_prf-rm3_fbdocs20_fbterms30_fbw0.5.txt", "mu1000_lam0.9_prf-rm3_fbdocs20_fbterms30_fbw0.5.txt"]
    assert all(expansions_path(p).is_file() for p in paths)
    [plain] = cli_run(coll, tmp_path / "plain", "--model", str(model_path), "--lam", "0.5")
    assert read_run(plain) != read_run(paths[0])


@pytest.mark.parametrize("args, message", [
    (["--feedback", "topics"], "--feedback topics expands queries with a topic model's topics: give --model"),
    (["--fb-docs", "5"], "--fb-docs sets pseudo-relevance feedback: add --feedback"),
    (["--fb-max-df", "0.5"], "--fb-max-df sets pseudo-relevance feedback: add --feedback"),
    (["--feedback", "rm3", "--fb-topics", "2"], "--fb-topics is the number of topics of --feedback topics"),
    (["--feedback", "rm3", "--baseline", "bm25"], "drop --baseline bm25"),
])
def test_bad_feedback_options_are_one_line_errors(coll, tmp_path, capsys, args, message):
    root, index, _, _ = coll
    capsys.readouterr()
    rc = main(["-q", "run", "--index", str(index.path), "--topics", str(root / "topics.tsv"),
               "--out-dir", str(tmp_path), *args])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.glob("*.txt"))


def test_a_run_without_feedback_removes_a_stale_expansions_file(coll, tmp_path):
    root, index, _, _ = coll
    out = tmp_path / "run.txt"
    base = ["-q", "run", "--index", str(index.path), "--topics", str(root / "topics.tsv"), "--out", str(out)]
    assert main(base + ["--feedback", "rm3"]) == 0 and expansions_path(out).is_file()
    assert main(base) == 0 and not expansions_path(out).exists()
    assert "feedback" not in read_settings(out)


def test_console_feedback_ranks_as_run_feedback_and_why_lists_the_expansion(coll):
    from retrieval.ui.console import Session
    from retrieval.ui.console_text import to_plain

    root, index, model, _ = coll
    s = Session(index, model=model, model_name="lda", lam=0.6)
    assert "needs none" in to_plain(Session(index).execute(":feedback topics"))  # no model: refused
    # a theme's words are in a third of the documents: maxdf=1 lets them expand a query
    assert to_plain(s.execute(":fb docs=5 terms=4 weight=0.4 topics=2 maxdf=1")).startswith("kept for when")
    assert "+topics docs5 terms4 topics2 w0.4 maxdf1" in to_plain(s.execute(":feedback topics"))
    assert "must be a whole number" in to_plain(s.execute(":fb docs=0"))
    assert "maxdf must be a share" in to_plain(s.execute(":fb maxdf=0"))
    assert to_plain(s.execute(":fb")).split()[-2:] == ["maxdf=1", "length=8"]
    assert to_plain(s.execute(":fb length=none")).split()[-2:] == ["lennone", "maxdf1"]
    s.execute(":fb length=8")
    shown = to_plain(s.execute("engine road"))
    assert "+topics docs5 terms4 topics2 w0.4 maxdf1" in shown.splitlines()[0]
    want, expansions = run_feedback(index, [load_topics(root / "topics.tsv")[0]], s.feedback, model=model,
                                    mu=1000.0, lam=0.6, progress=False)
    assert [r.docno for r in s.last.run(index.stats.docnos)][:20] == [r.docno for r in want][:20]
    assert np.allclose(s.last.scores[:20], [r.score for r in want][:20], rtol=1e-9)
    why = to_plain(s.execute(":why 1"))
    e = expansions["1"]
    assert f"feedback topics ({s.feedback.label()}) from 5 documents: {' '.join(e.docs)}" in why
    assert ", ".join(f"{t} {w:.3f}" for t, w in e.terms) in why
    for chain, k, p in e.topics:
        assert f"topic {k:4d}" in why and f"P(k|Q) {p:.3f}" in why
    score = float(why.split("score in the ranking: ")[1].split()[0])
    total = float(why.split("\ntotal")[1].split()[0])
    assert score == pytest.approx(total, abs=1e-3)  # the breakdown is over the expanded query
    assert any(t not in s.last.query.terms for t, _ in e.terms)  # expansion terms are in it
    s.execute(":feedback rm3")
    assert "+rm3 docs5 terms4 w0.4 maxdf1" in s.settings()
    s.execute("flood boat")
    assert "feedback rm3 (docs5 terms4 w0.4 maxdf1) from 5 documents" in to_plain(s.execute(":why 1"))
    s.execute(":feedback off")
    assert "+rm3" not in to_plain(s.execute("engine road")) and s.last.expansion is None


def test_pyterrier_feedback_equals_topicir_run(coll, tmp_path):
    pt = pytest.importorskip("pyterrier")
    import pandas as pd

    from retrieval.core.evaluate import per_topic
    from retrieval.core.sources import load_qrels
    from retrieval.pyterrier import FeedbackSettings, TopicIRRetriever

    root, index, model, model_path = coll
    topics = load_topics(root / "topics.tsv")
    frame = pd.DataFrame({"qid": [t.qid for t in topics], "query": [t.title for t in topics]})
    qrels = load_qrels(root / "qrels.txt")
    qrels_frame = pd.DataFrame({"qid": [q.qid for q in qrels], "docno": [q.docno for q in qrels],
                                "label": [q.rel for q in qrels]})
    systems = {"rm3": (TopicIRRetriever(index, feedback=FeedbackSettings("rm3", fb_docs=5)),
                       ["--feedback", "rm3", "--fb-docs", "5"]),
               "topics": (TopicIRRetriever(index, model, lam=0.6, feedback=FeedbackSettings("topics", fb_terms=6)),
                          ["--model", str(model_path), "--lam", "0.6", "--feedback", "topics", "--fb-terms", "6"])}
    with pytest.raises(ValueError, match="topic feedback expands queries"):
        TopicIRRetriever(index, feedback=FeedbackSettings("topics"))
    per_q = pt.Experiment([s for s, _ in systems.values()], frame, qrels_frame, eval_metrics=["map"],
                          names=list(systems), perquery=True)
    for name, (system, argv) in systems.items():
        [path] = cli_run(coll, tmp_path / name, *argv)
        run = read_run(path)
        res = system(frame)
        assert list(zip(res.qid, res.docno)) == [(r.qid, r.docno) for r in run]
        assert np.allclose(res.score, [r.score for r in run], rtol=1e-9)
        assert system.expansions_["1"].as_dict() == read_expansions(expansions_path(path))[0]
        ours = per_topic(run, qrels, ["AP"])["AP"]
        assert per_q[per_q.name == name].set_index("qid")["value"].to_dict() == pytest.approx(ours, abs=1e-12)
    assert "+topics docs20 terms6 topics3 w0.5" in repr(systems["topics"][0])


def test_report_lists_the_expansions_of_feedback_runs(coll, tmp_path):
    from retrieval.ui.report import build_report

    root, _, _, model_path = coll
    [plain] = cli_run(coll, tmp_path / "plain")
    [fb] = cli_run(coll, tmp_path / "fb", "--model", str(model_path), "--feedback", "topics", "--fb-terms", "5")
    files = build_report({"ql": plain, "fb": fb}, root / "qrels.txt", out_dir=tmp_path / "report", progress=False)
    md, html = files.markdown.read_text(), files.html.read_text()
    assert "Feedback expansions" in md and "Feedback expansions" in html
    assert f"fb: feedback topics docs20 terms5 topics3 w0.5, from {expansions_path(fb).name}" in md
    section = md.split("Feedback expansions")[1]
    for record in read_expansions(expansions_path(fb)):
        line = next(l for l in section.splitlines() if l.startswith(f"| {record['qid']} |"))
        assert ", ".join(f"{t} {w:.3f}" for t, w in record["terms"][:10]) in line
        assert all(f"{c}:{k} {p:.2f}" in line for c, k, p in record["topics"])  # two chains
    only_plain = build_report({"ql": plain}, root / "qrels.txt", out_dir=tmp_path / "r2", progress=False)
    assert "Feedback expansions" not in only_plain.markdown.read_text()
