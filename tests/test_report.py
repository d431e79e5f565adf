"""Evaluation reports: numbers equal `topicir eval`, significance tests on hand-made cases, sweeps
found in file names, the iterations table, topic views, a self-contained HTML file."""
import base64
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from retrieval.ui.cli import main
from retrieval.core.evaluate import aggregate
from retrieval.ui.report import build_report
from retrieval.ui.report_eval import (evaluate_runs, find_sweeps, label_runs, paired_tests, read_iterations, run_params,
                                      short_labels)
from retrieval.core.stats import CollectionStats
from retrieval.core.trec import read_qrels, read_run

DATA = Path(__file__).parent / "data"
QRELS = DATA / "qrels.txt"

# Topic 1: relevant 0001, 0002; topic 2: relevant 0003.
GOOD = """1 Q0 AP880212-0001 1 -1.0 good
1 Q0 AP880212-0002 2 -2.0 good
1 Q0 AP880212-0003 3 -3.0 good
2 Q0 AP880212-0003 1 -1.0 good
2 Q0 AP880212-0001 2 -2.0 good
"""
# AP topic 1 = (1/2 + 2/3) / 2 = 7/12; topic 2 = 1/3.
BAD = """1 Q0 AP880212-0003 1 -1.0 bad
1 Q0 AP880212-0001 2 -2.0 bad
1 Q0 AP880212-0002 3 -3.0 bad
2 Q0 AP880212-0001 1 -1.0 bad
2 Q0 AP880212-0004 2 -2.0 bad
2 Q0 AP880212-0003 3 -3.0 bad
"""


@pytest.fixture
def runs(tmp_path):
    paths = {}
    for name, text in (("run.mini.good.txt", GOOD), ("run.mini.bad.txt", BAD)):
        paths[name] = tmp_path / name
        paths[name].write_text(text)
    return paths


def test_paired_tests_by_hand():
    # d = 0.1, 0.2, 0.3, 0.4: t = 0.25 / (sqrt(0.05 / 3) / 2) = 3.873 with 3 df; Wilcoxon exact:
    # all four differences positive, p = 2 / 2**4.
    t_p, w_p, wins, ties, losses = paired_tests([0.5, 0.6, 0.7, 0.8], [0.4] * 4)
    assert t_p == pytest.approx(0.030466, abs=1e-5)
    assert w_p == pytest.approx(0.125)
    assert (wins, ties, losses) == (4, 0, 0)
    assert paired_tests([0.5, 0.4, 0.2, 0.4], [0.4, 0.4, 0.4, 0.4])[2:] == (1, 2, 1)
    assert paired_tests([0.3, 0.2], [0.3, 0.2]) == (1.0, 1.0, 0, 2, 0)
    t_p, w_p, *_ = paired_tests([0.3], [0.2])
    assert np.isnan(t_p) and np.isnan(w_p)


def test_run_params_and_labels():
    assert run_params("run.med.topics.title.lda.mu1000_lam0.7.txt") == {"mu": 1000.0, "lam": 0.7}
    assert run_params("run.med.topics.title.ql.mu1000.txt") == {"mu": 1000.0}
    assert run_params("run.med.topics.title.bm25+rm3.txt") == {}
    assert run_params("run.emu5.lambda.txt") == {}
    names = ["run.med.topics.title.ql.mu1000.txt", "run.med.topics.title.bm25+rm3.txt",
             "run.med.topics.title.lda.mu1000_lam0.7.txt"]
    assert short_labels(names) == ["ql.mu1000", "bm25+rm3", "lda.mu1000_lam0.7"]
    assert short_labels(["run.med.ql.txt"]) == ["med.ql"]
    assert short_labels(["a/run.x.txt", "b/run.x.txt"]) == ["a/run.x", "b/run.x"]
    assert list(label_runs(["a/run.x.txt", "b/run.x.txt"])) == ["a/run.x", "b/run.x"]
    with pytest.raises(ValueError, match="both labelled 'x'.*LABEL=PATH"):
        label_runs(["x=a/run.x.txt", "run.x.txt"])
    assert list(label_runs(["QL=a/run.x.txt", "b/run.y.txt"])) == ["y", "QL"]


def test_report_numbers_equal_topicir_eval(runs, tmp_path, capsys):
    files = build_report(list(map(str, runs.values())), str(QRELS), out_dir=tmp_path / "out")
    qrels = read_qrels(QRELS)
    evals = evaluate_runs({p.name: p for p in runs.values()}, qrels)
    for ev in evals:
        assert ev.means == aggregate(read_run(ev.path), qrels)
    bad = next(ev for ev in evals if "bad" in ev.label)
    assert bad.per_topic["AP"] == pytest.approx({"1": 7 / 12, "2": 1 / 3})
    assert bad.means["AP"] == pytest.approx((7 / 12 + 1 / 3) / 2)

    md = files.markdown.read_text()
    summary = md.split("## Summary")[1].split("##")[0]
    assert "| good (baseline) | **1.0000** |" in summary
    capsys.readouterr()
    assert main(["eval", *map(str, runs.values()), "--qrels", str(QRELS)]) == 0
    eval_out = capsys.readouterr().out
    for line in eval_out.splitlines():
        if line.startswith("run.mini."):
            name, *values = line.split()
            values = [v for v in values if "." in v]  # the means (eval also prints topic counts)
            label = name.removeprefix("run.mini.").removesuffix(".txt")
            row = next(r for r in summary.splitlines() if r.startswith(f"| {label}"))
            assert re.findall(r"\d\.\d{4}", row) == values, (row, line)
    # Significance: two topics, both worse.
    assert "| bad | MAP | 0.4583 | 1.0000 | -0.5417 | -54.2% |" in md and "0 / 0 / 2" in md


def test_html_is_self_contained_with_embedded_pngs(runs, tmp_path):
    files = build_report({"good": runs["run.mini.good.txt"], "bad": runs["run.mini.bad.txt"]}, str(QRELS),
                         out_dir=tmp_path / "out", baseline="bad", title="Mini report")
    page = files.html.read_text()
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 2  # per-topic differences, precision-recall
    assert all(base64.b64decode(i).startswith(b"\x89PNG\r\n\x1a\n") for i in images)
    assert not re.search(r'(src|href)="(?!data:|#)', page)  # nothing fetched from elsewhere
    assert "<title>Mini report</title>" in page and "Significance against bad" in page
    assert "topicir report good=" in page
    md = files.markdown.read_text()
    for name in re.findall(r"\]\((plots/[^)]+)\)", md):
        assert (tmp_path / "out" / name).is_file()
    with pytest.raises(ValueError, match="baseline .nope. is none of the runs; give one of: good"):
        build_report({"good": runs["run.mini.good.txt"]}, str(QRELS), out_dir=tmp_path, baseline="nope")
    with pytest.raises(FileNotFoundError, match="no such run file"):
        build_report([str(tmp_path / "missing.txt")], str(QRELS), out_dir=tmp_path)


def test_sweeps_are_found_and_plotted(tmp_path):
    lines = {0.3: BAD, 0.5: GOOD, 0.7: GOOD}
    paths = []
    for mu in (500, 1000):
        for lam, text in lines.items():
            paths.append(tmp_path / f"run.mini.t.title.lda.mu{mu}_lam{lam:g}.txt")
            paths[-1].write_text(text)
    paths.append(tmp_path / "run.mini.t.title.ql.mu1000.txt")
    paths[-1].write_text(BAD)
    qrels = read_qrels(QRELS)
    evals = evaluate_runs(label_runs(map(str, paths)), qrels)
    (sweep,) = find_sweeps(evals)
    assert sweep.family == "lda.mu*_lam*" and sweep.varying == ["mu", "lam"] and len(sweep.runs) == 6
    (sweep,) = find_sweeps([ev for ev in evals if ev.params.get("mu") == 500])
    assert sweep.varying == ["lam"] and sweep.fixed == {"mu": 500.0} and sweep.family == "lda.mu500_lam*"
    files = build_report([str(p) for p in paths], str(QRELS), out_dir=tmp_path / "out", baseline="ql.mu1000")
    md = files.markdown.read_text()
    assert "## Parameter sweeps" in md and "plots/sweep1_lam.png" in md and "plots/sweep1_mu.png" in md
    assert "| mu \\ lam | 0.3 | 0.5 | 0.7 |" in md and "| 500 | 0.4583 | **1.0000** | 1.0000 |" in md


def test_iterations_table(tmp_path, runs):
    csv_file = tmp_path / "iters.csv"
    csv_file.write_text("iteration,avg1,avg2\n200,0.30,0.32\n100,0.25,0.27\n")
    assert read_iterations(csv_file) == (["iteration", "avg1", "avg2"], [[100, 0.25, 0.27], [200, 0.30, 0.32]])
    js = tmp_path / "iters.json"
    js.write_text('[{"avg1": 0.25, "iteration": 100, "avg2": 0.27}]')
    assert read_iterations(js) == (["iteration", "avg1", "avg2"], [[100, 0.25, 0.27]])
    js.write_text('{"iteration": [100, 200], "avg1": [0.25, 0.3]}')
    assert read_iterations(js) == (["iteration", "avg1"], [[100, 0.25], [200, 0.3]])
    # As `topicir iterations --csv` writes it: the chains' MAPs in one column.
    csv_file.write_text("iteration,avg1,avg2,chains\n60,0.53,0.55,0.54 0.52\n70,0.54,0.56,0.55 0.53\n")
    assert read_iterations(csv_file) == (["iteration", "avg1", "avg2", "chains 1", "chains 2"],
                                         [[60, 0.53, 0.55, 0.54, 0.52], [70, 0.54, 0.56, 0.55, 0.53]])
    csv_file.write_text("iteration,avg1,avg2\n200,0.30,0.32\n100,0.25,0.27\n")
    bad = tmp_path / "bad.csv"
    bad.write_text("iteration,avg1\n100,0.2\n200,x\n")
    with pytest.raises(ValueError, match=r"bad.csv:3: expected numbers, got \['200', 'x'\]"):
        read_iterations(bad)
    bad.write_text("iter,avg1\n100,0.2\n")
    with pytest.raises(ValueError, match="no 'iteration' column"):
        read_iterations(bad)
    bad.write_text("iteration,avg1\n100\n")
    with pytest.raises(ValueError, match=r"bad.csv:2: expected 2 fields"):
        read_iterations(bad)
    files = build_report(list(map(str, runs.values())), str(QRELS), out_dir=tmp_path / "out", iterations=csv_file)
    md = files.markdown.read_text()
    assert "## MAP against Gibbs iteration" in md and "| 200 | **0.3000** | **0.3200** |" in md
    assert "plots/iterations.png" in md


def test_topic_view_with_a_model(tmp_path, runs):
    docs = ["AP880212-0001", "AP880212-0002", "AP880212-0003", "AP880212-0004"]
    words = [["airbu", "subsidi"], ["boe", "airbu"], ["rail", "strike"], ["snow", "rain"]]
    stats = CollectionStats.from_token_lists(docs, [[(w, [i]) for i, w in enumerate(ws)] for ws in words])
    index = SimpleNamespace(stats=stats)
    terms = stats.term_index

    class Model:
        kind = "fake"
        n_topics = 3

        def doc_topics(self, doc, top=10):
            return (np.array([0, 2]), np.array([0.9, 0.1])) if doc < 2 else (np.array([1, 2]), np.array([0.6, 0.4]))

        def topic_words(self, topic, top=10):
            ids = [[terms[w] for w in pair] for pair in (("airbu", "boe"), ("rail", "strike"), ("snow", "rain"))][topic]
            return np.array(ids[:top]), np.array([0.6, 0.4][:top])

    files = build_report(list(map(str, runs.values())), str(QRELS), out_dir=tmp_path / "out", model=Model(),
                         index=index)
    md = files.markdown.read_text()
    section = md.split("## Topics of Model")[1]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "topic" not in line]
    assert [r.split(" | ")[0] for r in rows] == ["| 0", "| 1", "| 2"]
    assert "airbu boe" in rows[0] and "snow rain" in rows[2]
    with pytest.raises(ValueError, match="needs its index"):
        build_report(list(map(str, runs.values())), str(QRELS), out_dir=tmp_path / "o2", model=Model())


def _chromium() -> str | None:
    return next((c for c in ("chromium", "chromium-browser", "google-chrome", "chrome") if shutil.which(c)), None)


@pytest.mark.skipif(_chromium() is None, reason="needs chromium (apt-get install -y chromium)")
def test_report_renders_in_headless_chromium(runs, tmp_path):
    files = build_report(list(map(str, runs.values())), str(QRELS), out_dir=tmp_path / "out")
    shot = tmp_path / "shot.png"
    subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--window-size=1200,2400", f"--screenshot={shot}", files.html.resolve().as_uri()],
                   check=True, capture_output=True, timeout=120)
    from PIL import Image

    image = np.asarray(Image.open(shot).convert("L"), dtype=np.float64)
    assert image.shape == (2400, 1200)
    # Text, tables and plots: far from a blank page.
    assert (image < 128).mean() > 0.01 and image.std() > 20


@pytest.mark.regression
def test_report_on_med_agrees_with_eval(shared_data, tmp_path, capsys):
    """QL and BM25+RM3 on med through the CLI; the report's MAP equals topicir eval's (and the README's)."""
    med = shared_data / "med"
    index = tmp_path / "med"
    assert main(["-q", "index", str(med / "docs"), "--out", str(index)]) == 0
    paths = []
    for extra in ([], ["--baseline", "bm25+rm3"]):
        assert main(["-q", "run", "--index", str(index), "--topics", str(med / "topics.trec"),
                     "--out-dir", str(tmp_path / "runs"), *extra]) == 0
    paths = sorted(str(p) for p in (tmp_path / "runs").glob("*.txt"))  # bm25+rm3, ql.mu1000
    capsys.readouterr()
    assert main(["-q", "report", *paths, "--qrels", str(med / "qrels.txt"), "--out", str(tmp_path / "out"),
                 "--baseline", "ql.mu1000"]) == 0
    html_path, md_path = capsys.readouterr().out.split()
    assert main(["eval", *paths, "--qrels", str(med / "qrels.txt")]) == 0
    eval_rows = {line.split()[0]: re.findall(r"\d\.\d{4}", line)  # measures, not topic counts
                 for line in capsys.readouterr().out.splitlines() if line.startswith("run.")}
    md = Path(md_path).read_text()
    for name, values in eval_rows.items():
        label = name.removeprefix("run.med.topics.title.").removesuffix(".txt")
        row = next(r for r in md.split("## Summary")[1].splitlines() if r.startswith(f"| {label}"))
        assert re.findall(r"\d\.\d{4}", row) == values
    assert eval_rows["run.med.topics.title.ql.mu1000.txt"][0] == "0.4955"
    assert eval_rows["run.med.topics.title.bm25+rm3.txt"][0] == "0.5936"
    assert Path(html_path).stat().st_size > 50_000


@pytest.mark.parametrize("kind, params, heading", [
    ("pam", dict(n_super=2, n_sub=3), "## Topic correlations of"),
    ("tcm", dict(n_topics=3), "## Collocations of"),
])
def test_pam_and_tcm_views_in_the_report(tmp_path, runs, kind, params, heading):
    from retrieval.core.index import build_index
    from retrieval.core.modelfiles import train_model

    index = build_index([DATA / "docs.trec"], tmp_path / "mini")
    model, path = train_model(index, kind, tmp_path / f"{kind}.npz", progress=False, n_chains=1, n_iter=10,
                              burn_in=5, sample_every=5, **params)
    files = build_report(list(map(str, runs.values())), str(QRELS), out_dir=tmp_path / "out", model=str(path),
                         index=index)
    md = files.markdown.read_text()
    assert heading in md
    section = md.split(heading)[1]
    # the adapter's view of this very model, word for word (PAM: correlations; TCM: collocations)
    from retrieval.core.plugins import hook

    view = hook(kind, "report_section")(model, index.stats.terms)["text"]
    assert view.strip() and view.splitlines()[0] in section and view.splitlines()[-1] in section
    if kind == "pam":
        assert "data:image/png;base64," in files.html.read_text().split("Topic correlations of")[1]


# -- plots with many runs; one topic section per model ----------------------------------------

def _drawn(fig):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    return renderer


@pytest.mark.parametrize("figure", ["pr", "lines"])
def test_plots_keep_their_axes_and_fit_their_legend_however_many_runs(figure):
    from matplotlib.colors import to_rgba

    from retrieval.ui import plots

    rng = np.random.default_rng(0)
    sizes = {}
    for n in (2, 12, 30):
        curves = {f"cranfield.title.lda-k{50 * i}.mu1000_lam0.{i % 10}": (np.linspace(0, 1, 11), rng.uniform(0, 1, 11))
                  for i in range(n)}
        fig = plots.pr_figure(curves) if figure == "pr" else plots.lines_figure(curves, "mu", title="MAP against mu")
        renderer = _drawn(fig)
        ax = fig.axes[0]
        box, page = ax.get_window_extent(renderer), fig.bbox
        assert (round(box.width), round(box.height)) == (600, 400)  # plots.AXES_SIZE at 100 dpi, for any n
        legend = (fig.legends or [ax.get_legend()])[0].get_window_extent(renderer)
        assert page.x0 <= legend.x0 and legend.x1 <= page.x1 and page.y0 <= legend.y0 and legend.y1 <= page.y1
        if n > 5:  # below the axes and their x label, not over the curves
            assert legend.y1 < ax.xaxis.label.get_window_extent(renderer).y0
        colors = [to_rgba(line.get_color()) for line in ax.get_lines()]
        assert len(colors) == n and len(set(colors)) == n
        sizes[n] = fig.get_size_inches()[1]
    assert sizes[2] < sizes[12] < sizes[30]  # the figure grows with the legend


def _train_lda(index, path):
    from retrieval.core.modelfiles import train_model

    return train_model(index, "lda", path, progress=False, n_chains=1, n_iter=10, burn_in=5, sample_every=5,
                       n_topics=3)[1]


def test_each_model_has_its_own_topics_from_its_own_runs(tmp_path):
    """Runs of two models and QL: each --model gets a section named by its file, weighed by the runs
    made with it (found by their settings, or by name when a run has none); two files of one name
    go by their paths."""
    from retrieval.core.index import build_index

    index = build_index([DATA / "docs.trec"], tmp_path / "mini")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    lda_a, lda_b = _train_lda(index, tmp_path / "a" / "lda.npz"), _train_lda(index, tmp_path / "b" / "lda.npz")
    other = _train_lda(index, tmp_path / "other.npz")
    runs = tmp_path / "runs"
    for model, lam in ((lda_a, "0.5"), (lda_b, "0.6"), (None, None)):
        extra = ["--model", str(model), "--lam", lam] if model else []
        assert main(["-q", "run", "--index", str(index.path), "--topics", str(DATA / "topics.trec"),
                     "--out-dir", str(runs), *extra]) == 0
    paths = sorted(runs.glob("*.txt"))
    assert [p.name for p in paths] == ["run.mini.topics.title.lda.mu1000_lam0.5.txt",
                                       "run.mini.topics.title.lda.mu1000_lam0.6.txt", "run.mini.topics.title.ql.mu1000.txt"]
    bare = tmp_path / "bare" / "run.mini.topics.title.other.mu1000_lam0.5.txt"  # no settings beside it
    bare.parent.mkdir()
    shutil.copy(paths[0], bare)
    files = build_report([*map(str, paths), str(bare)], str(QRELS), out_dir=tmp_path / "out",
                         model=[str(lda_a), str(lda_b), str(other)], index=index)
    md = files.markdown.read_text()
    sections = {s.split("\n", 1)[0]: s for s in md.split("\n## ")[1:]}
    a, b, mine = sections[f"Topics of {lda_a}"], sections[f"Topics of {lda_b}"], sections["Topics of other.npz"]
    assert "documents of lda.mu1000_lam0.5." in a and "documents of lda.mu1000_lam0.6." in b
    assert "documents of other.mu1000_lam0.5." in mine  # by its name: the run has no settings
    assert "None of the runs" not in a + b + mine
    html = files.html.read_text()
    assert sorted(re.findall(r'<h2 id="(topics[^"]*)"', html)) == ["topics", "topics-2", "topics-3"]
    assert f"--model {lda_a} --model {lda_b} --model {other} --index" in html


def test_a_model_no_run_used_says_so(tmp_path, runs):
    from retrieval.core.index import build_index

    index = build_index([DATA / "docs.trec"], tmp_path / "mini")
    path = _train_lda(index, tmp_path / "lda.npz")
    files = build_report(list(map(str, runs.values())), str(QRELS), out_dir=tmp_path / "out", model=str(path),
                         index=index)
    section = files.markdown.read_text().split("## Topics of lda.npz")[1]
    assert "None of the runs was made with lda.npz; these are the topics in all of them." in section
    assert "good" in section and "bad" in section
