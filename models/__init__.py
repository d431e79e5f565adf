"""Topic models for topicir: corpora, LDA by sparse collapsed Gibbs sampling, model files.

This package never imports ``retrieval``, jnius or pyserini.
"""
from .corpus import Corpus, corpus_from_docs, make_corpus, synthetic_corpus
from .lda import LDA
from .progress import TqdmCallback

__all__ = ["Corpus", "LDA", "TqdmCallback", "corpus_from_docs", "make_corpus", "synthetic_corpus"]
