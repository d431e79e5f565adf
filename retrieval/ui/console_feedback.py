"""Pseudo-relevance feedback in the console: ``:feedback rm3|topics|off``, its numbers with
``:fb docs=20 terms=30 weight=0.5 topics=3``, and the expansion a ranking used, for ``:why``
(a mixin of :class:`retrieval.ui.console.Session`). Queries are expanded by
:class:`retrieval.core.feedback.FeedbackQuery`, the class behind ``topicir run --feedback``."""
from __future__ import annotations

from ..core.feedback import (FB_DOCS, FB_LENGTH, FB_MAX_DF, FB_TERMS, FB_TOPICS, METHODS, ORIGINAL_WEIGHT,
                             FeedbackQuery, Settings)
from .console_text import ConsoleError, Fragments, _parse_float, check_lam

# :fb names -> Settings fields
FB_KEYS = {"docs": "fb_docs", "terms": "fb_terms", "weight": "original_weight", "topics": "fb_topics",
           "maxdf": "fb_max_df", "length": "fb_length"}
FB_DEFAULTS = {"fb_docs": FB_DOCS, "fb_terms": FB_TERMS, "original_weight": ORIGINAL_WEIGHT, "fb_topics": FB_TOPICS,
               "fb_max_df": FB_MAX_DF, "fb_length": FB_LENGTH}
FB_USAGE = "expected :fb docs=20 terms=30 weight=0.5 topics=3 maxdf=0.1 length=8 (any of them; length=none: no length rule)"


def parse_fb(spec: str) -> dict:
    """``"docs=5 terms=20,weight=0.3"`` -> ``{"fb_docs": 5, "fb_terms": 20, "original_weight": 0.3}``."""
    out = {}
    for part in spec.replace(",", " ").split():
        key, eq, value = part.partition("=")
        if not eq or key not in FB_KEYS:
            raise ConsoleError(f"{FB_USAGE}, got {part!r}")
        if key == "weight":
            out[FB_KEYS[key]] = check_lam(value)
        elif key == "maxdf":
            share = _parse_float(value, "maxdf")
            if not 0.0 < share <= 1.0:
                raise ConsoleError(f"maxdf must be a share of the documents in (0, 1], got {value!r}")
            out[FB_KEYS[key]] = share
        elif key == "length" and value.lower() == "none":
            out[FB_KEYS[key]] = None
        elif value.isdigit() and int(value) >= 1:
            out[FB_KEYS[key]] = int(value)
        else:
            raise ConsoleError(f"{key} must be a whole number >= 1, got {value!r}")
    return out


class FeedbackViews:
    feedback: Settings | None    # None: no feedback
    fb_values: dict              # the :fb numbers, kept while feedback is off

    def feedback_label(self) -> str:
        return "" if self.feedback is None else f" +{self.feedback.method} {self.feedback.label()}"

    def _feedback_settings(self, method: str) -> Settings:
        return Settings(method, **(FB_DEFAULTS | self.fb_values))

    def cmd_feedback(self, arg: str) -> Fragments:
        method, _, rest = arg.partition(" ")
        if not method:
            return [("", f"feedback: {self.feedback_label().strip() or 'off'}\n")]
        if method in ("off", "none"):
            self.feedback = None
            return [("", "feedback off\n")]
        if method not in METHODS:
            raise ConsoleError(f"feedback must be one of {', '.join(METHODS)} or off, got {method!r}")
        if method == "topics" and self.model is None:
            raise ConsoleError("topic feedback expands queries with a model's topics: load one with :model FILE "
                               "(:feedback rm3 needs none)")
        self.fb_values = self.fb_values | parse_fb(rest)
        self.feedback = self._feedback_settings(method)
        return [("", f"feedback:{self.feedback_label()}\n")]

    def cmd_fb(self, arg: str) -> Fragments:
        if not arg:
            values = FB_DEFAULTS | self.fb_values
            return [("", " ".join(f"{k}={'none' if values[v] is None else format(values[v], 'g')}"
                                  for k, v in FB_KEYS.items()) + "\n")]
        values = self.fb_values | parse_fb(arg)
        if self.feedback is None:
            self.fb_values = values
            return [("", "kept for when feedback is on (:feedback rm3|topics)\n")]
        try:
            settings = Settings(self.feedback.method, **(FB_DEFAULTS | values))
        except ValueError as exc:
            raise ConsoleError(str(exc)) from None
        self.fb_values, self.feedback = values, settings
        return [("", f"feedback:{self.feedback_label()}\n")]

    def feedback_query(self, prepared, text: str, mu: float, lam: float):
        """The expanded query, its expansion and every document's score under ``self.feedback``."""
        if self.feedback.method == "topics" and self.model is None:
            raise ConsoleError("topic feedback needs a topic model: :model FILE, or :feedback rm3 / off")
        fq = FeedbackQuery(self.index, text, prepared.model, mu=mu, lam=lam, prepared=prepared)
        query, expansion = fq.expansion(self.feedback)
        scores, _ = fq.scores(self.feedback)
        return query, expansion, scores

    def expansion_lines(self, expansion, words: int = 8) -> Fragments:
        """What feedback did to the query: the expanded query's terms and weights, the feedback
        documents, and (topic feedback) the topics that expanded it."""
        s = expansion.settings
        docs = " ".join(expansion.docs[:10]) + (" ..." if len(expansion.docs) > 10 else "")
        out = [("class:dim", f"feedback {s.method} ({s.label()}) from {len(expansion.docs)} documents: {docs}\n"),
               ("", "  expanded query (weight): " + ", ".join(f"{t} {w:.3f}" for t, w in expansion.terms) + "\n")]
        for chain, k, p in expansion.topics:
            ids, _ = (self.model.topic_words(k, top=words, chain=chain) if chain else
                      self.model.topic_words(k, top=words))
            where = f" (chain {chain})" if getattr(self.model, "n_chains", 1) > 1 else ""
            out.append(("", f"  topic {k:4d}{where}  P(k|Q) {p:.3f}  "
                            f"{' '.join(self.stats.terms[w] for w in ids)}\n"))
        return out
