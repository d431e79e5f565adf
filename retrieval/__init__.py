"""topicir: query likelihood over Lucene indexes, smoothed with topic models.

The public API: everything a user composes an experiment from (see the README's Python API).
Importing it starts no JVM; the JVM starts on the first index build or Lucene baseline.
"""
from models import TopicModel, kinds, model_class
from models._version import __version__

from .core.baselines import BASELINES, run_baseline
from .core.evaluate import aggregate, per_topic
from .core.feedback import Expansion, Settings as FeedbackSettings, read_expansions, run_feedback, sweep_feedback
from .core.frames import per_topic_frame, run_frame
from .core.index import Index, build_index
from .core.infer import fold_in_texts, infer, text_term_ids
from .core.modelfiles import load_model, train_model
from .core.ranking import PreparedQuery, prepare, rank, run_name, run_topics, save_run, sweep_topics
from .core.scoring import LAM, MU
from .core.sources import load_qrels, load_topics
from .core.trec import Qrel, ScoredDoc, Topic, read_run, write_run

__all__ = [
    "BASELINES", "Expansion", "FeedbackSettings", "Index", "LAM", "MU", "PreparedQuery", "Qrel", "ScoredDoc", "Topic", "TopicModel",
    "__version__", "aggregate", "build_index", "fold_in_texts", "infer", "kinds", "load_model",
    "load_qrels", "load_topics",
    "model_class", "per_topic", "per_topic_frame", "prepare", "rank", "read_expansions", "read_run",
    "run_baseline", "run_feedback", "run_frame", "run_name", "run_topics", "save_run", "sweep_feedback",
    "sweep_topics", "text_term_ids", "train_model",
    "write_run",
]
