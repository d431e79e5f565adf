"""Plots of the evaluation report as PNG bytes (matplotlib's Agg canvas, no pyplot state).

Every function takes plain numbers and returns the PNG; :mod:`retrieval.report` decides what to
plot. PNGs carry no creation time or software version, so the same numbers give the same bytes.
"""
from __future__ import annotations

import io
from collections.abc import Mapping, Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

DPI = 100
_PNG_METADATA = {"Software": None}


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata=_PNG_METADATA, bbox_inches="tight")
    return buf.getvalue()


def topic_differences(diffs: Mapping[str, Sequence[float]], baseline: str, measure: str = "AP") -> bytes:
    """Per-topic ``measure`` of each run minus the baseline's, one panel per run, topics sorted
    by difference (the usual "improvement per query" bar chart)."""
    n = max(len(diffs), 1)
    cols = 1 if n <= 3 else 2
    rows = -(-n // cols)
    fig = Figure(figsize=(8 if cols == 1 else 11, 2.4 * rows))
    low = min((min(v) for v in diffs.values() if len(v)), default=-1)
    high = max((max(v) for v in diffs.values() if len(v)), default=1)
    pad = 0.05 * max(high - low, 1e-6)
    for i, (label, values) in enumerate(diffs.items()):
        ax = fig.add_subplot(rows, cols, i + 1)
        values = sorted(values, reverse=True)
        colors = ["#2a7d2a" if v > 0 else "#b22222" if v < 0 else "#888888" for v in values]
        ax.bar(range(len(values)), values, width=1.0, color=colors)
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_xlim(-0.5, len(values) - 0.5)
        ax.set_ylim(min(low, 0) - pad, max(high, 0) + pad)  # one scale for all panels
        ax.set_ylabel(f"\u0394 {measure}")
        ax.set_title(f"{label} \u2212 {baseline}", fontsize=9)
        ax.set_xticks([])
        if i >= n - cols:
            ax.set_xlabel("topics, sorted by difference", fontsize=8)
    fig.tight_layout()
    return _png(fig)


def _styles(n: int):
    """Distinct (colour, line style) pairs: tab10 colours, then again dashed, dotted, ..."""
    dashes = ("-", "--", ":", "-.")
    return [(f"C{i % 10}", dashes[(i // 10) % len(dashes)]) for i in range(n)]


def _legend(ax, n: int) -> None:
    if n > 6:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    else:
        ax.legend(fontsize=8)


def pr_curves(curves: Mapping[str, tuple[Sequence[float], Sequence[float]]]) -> bytes:
    """11-point interpolated precision-recall curves: ``{label: (recall levels, precision)}``."""
    fig = Figure(figsize=(6, 4.5))
    ax = fig.add_subplot()
    for (label, (recall, precision)), (color, dash) in zip(curves.items(), _styles(len(curves))):
        ax.plot(recall, precision, marker="o", markersize=3, color=color, linestyle=dash, label=label)
    ax.set_xlabel("recall")
    ax.set_ylabel("interpolated precision")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    _legend(ax, len(curves))
    return _png(fig)


def lines(series: Mapping[str, tuple[Sequence[float], Sequence[float]]], xlabel: str, ylabel: str = "MAP",
          title: str | None = None, hline: tuple[str, float] | None = None, logx: bool = False) -> bytes:
    """One line per ``{label: (x, y)}``; ``hline`` = (label, y) draws a dashed reference (the baseline).
    With ``logx`` the x axis is logarithmic, ticked at the x values themselves."""
    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot()
    for (label, (x, y)), (color, dash) in zip(series.items(), _styles(len(series))):
        ax.plot(x, y, marker="o", markersize=4, color=color, linestyle=dash, label=label)
    if hline is not None:
        ax.axhline(hline[1], color="gray", linestyle="--", linewidth=1, label=hline[0])
    if logx:
        ticks = sorted({float(v) for x, _ in series.values() for v in x})
        ax.set_xscale("log")
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.minorticks_off()
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    if len(series) > 1 or hline is not None:
        _legend(ax, len(series) + (hline is not None))
    return _png(fig)
