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


def topic_differences(diffs: Mapping[str, Sequence[float]], baseline: str, measure: str = "MAP") -> bytes:
    """Per-topic ``measure`` of each run minus the baseline's, one panel per run, topics sorted
    by difference (the usual "improvement per query" bar chart)."""
    n = max(len(diffs), 1)
    fig = Figure(figsize=(8, 2.4 * n))
    for i, (label, values) in enumerate(diffs.items()):
        ax = fig.add_subplot(n, 1, i + 1)
        values = sorted(values, reverse=True)
        colors = ["#2a7d2a" if v > 0 else "#b22222" if v < 0 else "#888888" for v in values]
        ax.bar(range(len(values)), values, width=1.0, color=colors)
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_xlim(-0.5, len(values) - 0.5)
        ax.set_ylabel(f"\u0394 {measure}")
        ax.set_title(f"{label} \u2212 {baseline}", fontsize=10)
        ax.set_xticks([])
    if fig.axes:
        fig.axes[-1].set_xlabel("topics, sorted by difference")
    fig.tight_layout()
    return _png(fig)


def pr_curves(curves: Mapping[str, tuple[Sequence[float], Sequence[float]]]) -> bytes:
    """11-point interpolated precision-recall curves: ``{label: (recall levels, precision)}``."""
    fig = Figure(figsize=(6, 4.5))
    ax = fig.add_subplot()
    for label, (recall, precision) in curves.items():
        ax.plot(recall, precision, marker="o", markersize=3, label=label)
    ax.set_xlabel("recall")
    ax.set_ylabel("interpolated precision")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)


def lines(series: Mapping[str, tuple[Sequence[float], Sequence[float]]], xlabel: str, ylabel: str = "MAP",
          title: str | None = None, hline: tuple[str, float] | None = None, logx: bool = False) -> bytes:
    """One line per ``{label: (x, y)}``; ``hline`` = (label, y) draws a dashed reference (the baseline)."""
    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot()
    for label, (x, y) in series.items():
        ax.plot(x, y, marker="o", markersize=4, label=label)
    if hline is not None:
        ax.axhline(hline[1], color="gray", linestyle="--", linewidth=1, label=hline[0])
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    if len(series) > 1 or hline is not None:
        ax.legend(fontsize=8)
    return _png(fig)
