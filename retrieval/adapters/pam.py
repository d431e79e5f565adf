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
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # here: `topicir pam-view --help` stays fast
    from matplotlib.figure import Figure

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


# -- hooks (see retrieval.adapters) -----------------------------------------------------------


def report_section(model, terms) -> dict:
    """Super-topics with their sub-topics by alpha_ij (Li & McCallum, Figure 4)."""
    rows = correlation_rows(model, terms)
    return {"title": "Topic correlations", "text": correlation_text(rows),
            "figure": ("pam_correlations", correlation_figure(rows),
                       "Super-topics and their strongest sub-topics (edge: alpha_ij)")}


def add_commands(sub) -> None:
    s = sub.add_parser("pam-view", help="PAM topic correlations: super-topics, sub-topics by alpha_ij, top words")
    s.add_argument("--index", required=True)
    s.add_argument("--model", required=True, help="a PAM model file (topicir train pam)")
    s.add_argument("--chain", type=int, default=0)
    s.add_argument("--supers", type=int, default=10, help="super-topics shown (largest first)")
    s.add_argument("--subs", type=int, default=5, help="sub-topics per super-topic")
    s.add_argument("--words", type=int, default=8)
    s.add_argument("--out", help="also draw the graph into this .png or .svg file")
    s.set_defaults(func=_cmd_view)


def _cmd_view(args) -> int:
    from pathlib import Path

    from ..core.index import Index
    from ..core.modelfiles import load_model

    index = Index(args.index)
    model = load_model(args.model, index, kind="pam")
    rows = correlation_rows(model, index.stats.terms, chain=args.chain, n_super=args.supers,
                            n_sub=args.subs, n_words=args.words)
    print(correlation_text(rows))
    if args.out:
        out = Path(args.out)
        out.write_bytes(correlation_figure(rows, fmt=out.suffix.lstrip(".").lower() or "png"))
        print(out)
    return 0
