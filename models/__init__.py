"""Topic models for topicir: corpora, the model protocol and registry, and the trainers.

This package never imports ``retrieval``, jnius or pyserini (and torch only for the kinds that
need it, on first use through the registry).
"""
from .base import TopicModel
from .corpus import Corpus, corpus_from_docs, make_corpus, synthetic_corpus
from .lda import LDA
from .pam import PAM
from .progress import TqdmCallback
from .registry import kinds, load, model_class
from .tcm import TCM

__all__ = ["Corpus", "LDA", "PAM", "TCM", "TopicModel", "TqdmCallback", "corpus_from_docs", "kinds",
           "load", "make_corpus", "model_class", "synthetic_corpus"]
