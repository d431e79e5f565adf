"""topicir: query likelihood over Lucene indexes, smoothed with topic models.

The public API: everything a user composes an experiment from (see the README's Python API).
Importing it starts no JVM (the JVM starts on the first index build or Lucene baseline) and
loads nothing heavy: each name is imported on first use (PEP 562).
"""
import importlib

from models._version import __version__

_EXPORTS = {
    "TopicModel": "models", "kinds": "models", "model_class": "models",
    "BASELINES": ".core.baselines", "run_baseline": ".core.baselines",
    "aggregate": ".core.evaluate", "per_topic": ".core.evaluate",
    "Expansion": ".core.feedback", "FeedbackSettings": ".core.feedback:Settings",
    "read_expansions": ".core.runs", "run_feedback": ".core.feedback", "sweep_feedback": ".core.feedback",
    "per_topic_frame": ".core.frames", "run_frame": ".core.frames",
    "Index": ".core.index", "build_index": ".core.index",
    "fold_in_texts": ".core.infer", "infer": ".core.infer", "text_term_ids": ".core.infer",
    "load_model": ".core.modelfiles", "train_model": ".core.modelfiles",
    "PreparedQuery": ".core.ranking", "prepare": ".core.ranking", "rank": ".core.ranking",
    "run_name": ".core.runs", "run_topics": ".core.ranking", "save_run": ".core.runs",
    "sweep_topics": ".core.ranking",
    "run_sharded": ".core.sharded_ranking", "sweep_sharded": ".core.sharded_ranking",
    "ShardedIndex": ".core.shards", "build_shards": ".core.shards",
    "LAM": ".core.scoring", "MU": ".core.scoring",
    "load_qrels": ".core.sources", "load_topics": ".core.sources",
    "Qrel": ".core.trec", "ScoredDoc": ".core.trec", "Topic": ".core.trec", "read_run": ".core.trec",
    "write_run": ".core.trec",
}

__all__ = sorted(["__version__", *_EXPORTS])


def __getattr__(name):
    """``retrieval.NAME``: the API name, imported from its module on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, _, attr = _EXPORTS[name].partition(":")
    value = getattr(importlib.import_module(module, __name__), attr or name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
