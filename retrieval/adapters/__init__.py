"""Retrieval-side extras of a model kind, one module per kind: ``retrieval/adapters/<kind>.py``.

Core retrieval (ranking, the console, reports, the CLI) never names a model kind: it looks the
kind's module up by name (:func:`retrieval.core.plugins.hook`) and uses what it defines. Every hook is optional; a kind
without a module (or without a hook) gets the default behaviour that works from the model
protocol alone (:class:`models.common.base.TopicModel`).

Hooks an adapter module may define:

``training_inputs(index, progress[, model]) -> dict``
    The extra ``fit`` inputs the model's ``training_inputs`` names, derived from an index
    (TCM: where collocations must stop; tree-LDA: WordNet synsets as index terms). A hook with a
    ``model`` parameter gets the estimator, to read its settings (tree-LDA: ``wordnet``).
``fold_in_inputs(index, model, n_docs, to_model) -> dict``
    The extra ``fold_in`` inputs of the documents added to ``index`` after its first ``n_docs``
    (TCM: their splits), over the tokens the model knows (``to_model``: the model's term id of
    every index term, -1 for terms it never saw).
``query_extra(index, model, text, query) -> QueryExtra | None``
    Extra query parts scored beside the query terms (TCM: the query's collocations), see
    :class:`retrieval.core.ranking.QueryExtra`. On an index grown since training, ``model`` is a
    :class:`retrieval.core.extension.ExtendedModel` (``to_model`` maps the index's term ids to the
    model's, ``folded`` holds the added documents' posteriors).
``batch_tables(model, term_ids, extras) -> (table, list)``
    P_TM(w|d) of ``term_ids`` (n_docs, n_terms) and the tables of many queries' extra parts
    (``QueryExtra.parts``), one (n_docs, n_parts) per query in order, each its own array (not a
    view of a table the whole group shares, which would outlive the group), in one call: a batch reads
    the documents once for its terms and parts together
    (:func:`retrieval.core.ranking.batch_tables`); without it, ``p_w_d`` and each part's ``p_tm``.
``topic_lines(model, terms, topic, top) -> list[str]``
    How one topic reads in the console's ``:topic`` and the report's topic list (default: its
    top words from ``topic_words``).
``report_section(model, terms) -> dict | None``
    A model-specific section of ``topicir report`` (PAM: super-topic correlations; aviPAM: a
    CTM's topic correlations): ``title``, ``text`` and optionally ``figure``; None keeps the
    default topic table.
``add_commands(subparsers)``
    CLI subcommands of the kind's own (``pam-view``, ``tcm-view``); each sets ``func``.
"""
