"""Speed benchmarks, one module per area (``topicir bench AREA``)."""
import warnings


def import_tomotopy():
    """tomotopy, the reference sampler of the LDA and PAM benchmarks. Its C extension registers a
    type whose name lacks a module ("_VocabDict"), which Python reports on import with a
    DeprecationWarning ("builtin type _VocabDict has no __module__ attribute"); the type works
    all the same, so that one warning is silenced, here only."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="builtin type _VocabDict has no __module__ attribute",
                                category=DeprecationWarning)
        import tomotopy
    return tomotopy
