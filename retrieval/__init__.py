"""topicir retrieval: Lucene indexes, TREC readers, query likelihood with topic-model smoothing."""
__version__ = "0.1.0"
