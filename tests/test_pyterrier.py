"""The PyTerrier transformers (retrieval.pyterrier): frame in, frame out, and pt.Experiment's MAP
equal to `topicir run` + `topicir eval` on the same topics (med, from ../shared/data)."""
import tempfile
from pathlib import Path

import pytest

pt = pytest.importorskip("pyterrier")
import pyterrier.testing as pt_testing  # noqa: E402  (not its class: pytest would collect it)

from retrieval.core.evaluate import per_topic  # noqa: E402
from retrieval.core.index import build_index  # noqa: E402
from retrieval.core.modelfiles import train_model  # noqa: E402
from retrieval.core.sources import load_qrels, load_topics  # noqa: E402
from retrieval.core.trec import read_run  # noqa: E402
from retrieval.pyterrier import LuceneRetriever, TopicIRRetriever  # noqa: E402
from retrieval.ui.cli import main  # noqa: E402

DATA = Path(__file__).parent / "data"
_TMP = tempfile.TemporaryDirectory(prefix="topicir-pt-")  # the fixture index of the unittest classes


def _mini_index():
    path = Path(_TMP.name) / "ap-mini"
    if not path.exists():
        build_index([DATA / "docs.trec"], path)
    return path


class TestTopicIRTransformer(pt_testing.TransformerTestCase):
    @staticmethod
    def get_transformer():
        return TopicIRRetriever(_mini_index())


class TestLuceneTransformer(pt_testing.TransformerTestCase):
    @staticmethod
    def get_transformer():
        return LuceneRetriever(_mini_index(), "bm25")


def _frame(topics):
    import pandas as pd

    return pd.DataFrame({"qid": [t.qid for t in topics], "query": [t.title for t in topics]})


def test_result_frame_on_the_fixture():
    topics = _frame(load_topics(DATA / "topics.trec"))
    res = TopicIRRetriever(_mini_index(), depth=3)(topics)
    assert list(res.columns[:5]) == ["qid", "query", "docno", "score", "rank"]
    assert res.groupby("qid").size().to_dict() == {"1": 3, "2": 3}
    first = res[res["rank"] == 0].set_index("qid")["docno"].to_dict()
    assert first["2"] == "AP880212-0003"  # "Rail Strikes": the rail story first
    assert set(res[(res.qid == "1") & (res["rank"] < 2)].docno) == {"AP880212-0001", "AP880212-0002"}
    for _, group in res.groupby("qid"):
        assert list(group["rank"]) == [0, 1, 2] and group["score"].is_monotonic_decreasing
    assert (res[res.qid == "1"]["query"] == "Airbus Subsidies").all()


def test_bad_parameters_and_frames_are_refused():
    with pytest.raises(ValueError, match="lam must be in"):
        TopicIRRetriever(_mini_index(), lam=1.5)
    with pytest.raises(ValueError, match="unknown baseline 'bm26'"):
        LuceneRetriever(_mini_index(), "bm26")
    import pandas as pd

    with pytest.raises(pt.validate.InputValidationError):
        TopicIRRetriever(_mini_index())(pd.DataFrame({"qid": ["1"]}))


@pytest.fixture(scope="module")
def med(shared_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("pt-med")
    index = build_index([shared_data / "med" / "docs"], root / "med")
    model_path = root / "lda.npz"
    train_model(index, "lda", model_path, n_topics=20, n_chains=1, n_iter=20, burn_in=10, sample_every=5,
                progress=False, checkpoint=False)
    return index, model_path, shared_data / "med"


@pytest.mark.regression
def test_experiment_map_equals_topicir_eval(med, tmp_path, capsys):
    index, model_path, data = med
    topics_file, qrels_file = str(data / "topics.trec"), str(data / "qrels.txt")
    topics = _frame(load_topics(topics_file))
    qrels = pd_qrels(load_qrels(qrels_file))
    systems = [LuceneRetriever(index, "bm25"), TopicIRRetriever(index), TopicIRRetriever(index, model_path, lam=0.7)]
    names = ["bm25", "ql", "lda"]
    exp = pt.Experiment(systems, topics, qrels, eval_metrics=["map"], names=names, baseline=1)
    # per topic (PyTerrier allows no baseline there): the systems' result frames, evaluated as given
    per_q = pt.Experiment([s(topics) for s in systems], topics, qrels, eval_metrics=["map"], names=names,
                          perquery=True)
    # the same rankings through the command line
    argvs = {"bm25": ["--baseline", "bm25"], "ql": [], "lda": ["--model", str(model_path), "--lam", "0.7"]}
    for name, extra in argvs.items():
        run_file = tmp_path / f"{name}.txt"
        assert main(["-q", "run", "--index", str(index.path), "--topics", topics_file, "--out", str(run_file),
                     *extra]) == 0
        ours = per_topic(read_run(run_file), load_qrels(qrels_file), ["AP"])["AP"]
        theirs = per_q[per_q.name == name].set_index("qid")["value"].to_dict()
        assert theirs == ours  # AP of every topic, bit for bit
        pt_map = float(exp.set_index("name").loc[name, "map"])
        assert pt_map == pytest.approx(sum(ours.values()) / len(ours), abs=1e-12)
        capsys.readouterr()
        assert main(["eval", str(run_file), "--qrels", qrels_file, "--measures", "MAP"]) == 0
        assert f"{pt_map:.4f}" in capsys.readouterr().out
    maps = exp.set_index("name")["map"]
    assert maps["lda"] > maps["ql"] > 0.45  # topic smoothing helps on med even with a small model
    assert 0 < float(exp.set_index("name").loc["lda", "map p-value"]) < 1  # paired t-test against QL


def pd_qrels(qrels):
    import pandas as pd

    return pd.DataFrame({"qid": [q.qid for q in qrels], "docno": [q.docno for q in qrels],
                         "label": [q.rel for q in qrels]})
