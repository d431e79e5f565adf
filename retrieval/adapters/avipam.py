"""Retrieval-side view of aviPAM models: a CTM's learned topic correlations (the strongest
positive and negative pairs with their top words) in ``topicir report``; the other
architectures keep the default topic table."""
from __future__ import annotations

import numpy as np


def correlated_pairs(model, terms, n=8, words=6) -> list[tuple]:
    """The ``n`` most positively and ``n`` most negatively correlated topic pairs of a CTM:
    (correlation, topic i, topic j, top words of i, top words of j), strongest first."""
    R = model.topic_correlations()
    i, j = np.triu_indices(len(R), 1)
    order = np.argsort(-R[i, j], kind="stable")
    picks = list(order[:n]) + list(order[::-1][:n])
    def top(k):
        return " ".join(terms[w] for w in model.topic_words(int(k), top=words)[0])
    return [(float(R[i[p], j[p]]), int(i[p]), int(j[p]), top(i[p]), top(j[p])) for p in picks]


def correlation_text(pairs) -> str:
    lines = []
    for r, a, b, wa, wb in pairs:
        lines.append(f"{r:+.3f}  topic {a:>3}  {wa}\n        topic {b:>3}  {wb}")
    return "\n".join(lines)


def report_section(model, terms) -> dict | None:
    """A CTM's topic correlations (centred logits of its learned prior); None for the others."""
    from models.avipam.model import parse_arch

    if not parse_arch(model.arch).full_cov or getattr(model, "net_", None) is None:
        return None
    return {"title": "Topic correlations (CTM prior, centred logits)",
            "text": correlation_text(correlated_pairs(model, terms))}
