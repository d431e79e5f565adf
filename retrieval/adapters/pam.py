"""The topic-correlation view of a trained PAM: every super-topic with its sub-topics ranked by
alpha_ij and their top words (Li & McCallum, Figure 4 and Table 13), as text and as a picture.

    topicir pam-view --index indexes/ap --model indexes/ap/models/pam-....npz --out corr.svg

Pictures are a two-column graph (super-topics left, sub-topics right, edge width ~ alpha_ij)
drawn on matplotlib's Agg/SVG canvases without pyplot state; the bytes are returned and the
caller writes them.
"""
from __future__ import annotations

import io
from typing import NamedTuple

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


class SubTopic(NamedTuple):
    sub: int
    alpha: float         # alpha_ij averaged over the chain's kept samples
    words: list          # top words of the sub-topic


class SuperTopic(NamedTuple):
    super: int
    share: float         # share of the corpus' tokens assigned to it
    alpha_sum: float     # sum_j alpha_ij
    subs: list           # SubTopic, by decreasing alpha


def correlation_rows(model, terms, chain=0, n_super=10, n_sub=5, n_words=8) -> list[SuperTopic]:
    """The ``n_super`` largest super-topics of ``chain`` with their ``n_sub`` strongest edges.

    ``terms`` maps term ids to strings (e.g. ``index.stats.terms``)."""
    rows = []
    for r in model.correlations(chain=chain, top_subs=n_sub)[:n_super]:
        subs = [SubTopic(j, a, [terms[w] for w in model.topic_words(j, top=n_words, chain=chain)[0]])
                for j, a in r["subs"]]
        rows.append(SuperTopic(r["super"], r["share"], r["alpha_sum"], subs))
    return rows


def correlation_text(rows: list[SuperTopic]) -> str:
    out = []
    for r in rows:
        out.append(f"super {r.super:>4}  share {100 * r.share:5.2f} %  sum alpha {r.alpha_sum:8.3f}")
        for s in r.subs:
            out.append(f"    sub {s.sub:>4}  alpha {s.alpha:8.4f}  {' '.join(s.words)}")
    return "\n".join(out)


def correlation_figure(rows: list[SuperTopic], fmt: str = "png", n_words: int = 4) -> bytes:
    """The view as a graph, PNG or SVG bytes. A sub-topic shared by several super-topics is
    drawn once, with an edge from each."""
    subs = []
    for r in rows:
        for s in r.subs:
            if s.sub not in [t.sub for t in subs]:
                subs.append(s)
    height = max(len(rows), len(subs), 2) * 0.32 + 1
    fig = Figure(figsize=(11, height))
    ax = fig.add_subplot(1, 1, 1)
    ax.set_axis_off()
    y_sup = {r.super: 1 - (k + 0.5) / len(rows) for k, r in enumerate(rows)}
    y_sub = {s.sub: 1 - (k + 0.5) / len(subs) for k, s in enumerate(subs)}
    top = max((s.alpha for r in rows for s in r.subs), default=1.0) or 1.0
    for k, r in enumerate(rows):
        color = f"C{k % 10}"
        for s in r.subs:
            ax.plot([0.22, 0.55], [y_sup[r.super], y_sub[s.sub]], color=color, alpha=0.7,
                    linewidth=0.5 + 5 * s.alpha / top, solid_capstyle="round")
        ax.text(0.21, y_sup[r.super], f"super {r.super} ({100 * r.share:.1f} %)", ha="right",
                va="center", fontsize=8, color=color)
    for s in subs:
        ax.text(0.56, y_sub[s.sub], f"{s.sub}: {' '.join(s.words[:n_words])}", ha="left",
                va="center", fontsize=8)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_title("PAM: super-topics and their sub-topics (edge width ~ alpha_ij)", fontsize=10)
    buf = io.BytesIO()
    if fmt == "png":
        FigureCanvasAgg(fig)
        fig.savefig(buf, format="png", dpi=110, metadata={"Software": None}, bbox_inches="tight")
    elif fmt == "svg":
        from matplotlib.backends.backend_svg import FigureCanvasSVG

        FigureCanvasSVG(fig)
        fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight")
    else:
        raise ValueError(f"picture format must be 'png' or 'svg', got {fmt!r}")
    return buf.getvalue()
