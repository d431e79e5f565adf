"""A batch does each piece of its per-query work once: every query is analysed by the index's
analyzer (a JVM call) once, the model is made a document model of the index once, and loading a
model file reads its header once."""
from collections import Counter
from pathlib import Path

import pytest

from models.common import checkpoint
from retrieval.core import extension, feedback, modelfiles, ranking
from retrieval.core.feedback import Settings, run_feedback
from retrieval.core.index import build_index
from retrieval.core.modelfiles import load_model, train_model
from retrieval.core.ranking import sweep_topics
from retrieval.core.sources import load_qrels, load_topics
from retrieval.core.trec import topic_query
from retrieval.experiments.iterations import iteration_table

DATA = Path(__file__).parent / "data"
SMALL = dict(n_topics=3, n_chains=1, n_iter=8, seed=1)


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    root = tmp_path_factory.mktemp("once")
    index = build_index([DATA / "docs.trec"], root / "mini")
    model, path = train_model(index, "lda", root / "lda.npz", progress=False, **SMALL)
    return index, model, path, load_topics(DATA / "topics.trec")


def counted(monkeypatch, owners, name) -> list:
    """The arguments of every call of ``name``, replaced by a counting twin on each of ``owners``."""
    calls, real = [], getattr(owners[0], name)

    def twin(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    for owner in owners:  # a module that does not import it gets it too, in case it ever does
        monkeypatch.setattr(owner, name, twin, raising=False)
    return calls


def batches(index, model, topics):
    """Every way a batch ranks: sweeps of (mu, lam) settings, feedback, with and without a model,
    and per kept sample (``topicir iterations``)."""
    yield lambda: sweep_topics(index, topics, [(1000.0, 0.7), (500.0, 1.0)], model=model, progress=False)
    yield lambda: sweep_topics(index, topics, [(1000.0, 1.0)], progress=False)
    yield lambda: run_feedback(index, topics, Settings("rm3"), model=model, lam=0.7, progress=False)
    yield lambda: run_feedback(index, topics, Settings("topics"), model=model, lam=1.0, progress=False)
    yield lambda: run_feedback(index, topics, Settings("rm3"), progress=False)
    yield lambda: iteration_table(index, model, topics, load_qrels(DATA / "qrels.txt"))


def test_a_batch_analyses_each_query_once(mini, monkeypatch):
    index, model, _, topics = mini
    calls = counted(monkeypatch, [index], "analyze")
    texts = Counter(topic_query(t, "title") for t in topics)
    for batch in batches(index, model, topics):
        calls.clear()
        batch()
        assert Counter(text for (text,) in calls if text in texts) == texts


def test_a_batch_makes_the_model_a_document_model_once(mini, monkeypatch):
    index, model, _, topics = mini
    calls = counted(monkeypatch, [extension, ranking, feedback], "document_model")
    for batch in batches(index, model, topics):
        calls.clear()
        batch()
        assert len(calls) == 1


def test_loading_a_model_reads_its_header_once(mini, monkeypatch):
    index, _, path, _ = mini
    calls = counted(monkeypatch, [checkpoint, modelfiles], "read_header")
    load_model(path, index)
    assert len(calls) == 1
