"""Plots of the evaluation report as PNG bytes (matplotlib's Agg canvas, no pyplot state).

Every function takes plain numbers and returns the PNG; :mod:`retrieval.report` decides what to
plot. PNGs carry no creation time or software version, so the same numbers give the same bytes.
"""
from __future__ import annotations

import io
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgba
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


# A line plot's axes, inches: the same whatever its legend needs, which the figure grows for.
AXES_SIZE = (6.0, 4.0)
_MARGINS = (0.75, 0.6, 0.25, 0.35)  # left, bottom, right, top: room for ticks, labels and a title
_INSIDE = 5                         # legends of up to this many lines sit inside the axes
_LEGEND_FONT = 8


def _styles(n: int) -> list[tuple[tuple[float, float, float, float], str]]:
    """``n`` (colour, line style) pairs, no colour twice: tab10, then tab20's lighter shade of each
    dashed, then hues spread over the colour wheel dotted (and so on)."""
    tab20 = colormaps["tab20"].colors
    colors = [tuple(c) for c in colormaps["tab10"].colors] + [tuple(tab20[i]) for i in range(1, 20, 2)]
    if n > len(colors):
        wheel = colormaps["hsv"](np.linspace(0, 1, n - len(colors), endpoint=False) + 0.5 / (n - len(colors)))
        colors += [tuple(c[:3]) for c in wheel]
    dashes = ("-", "--", ":", "-.")
    return [(to_rgba(colors[i]), dashes[min(i // 10, len(dashes) - 1)]) for i in range(n)]


def _axes_figure(title: bool = False) -> tuple[Figure, object]:
    """A figure holding one axes of :data:`AXES_SIZE`."""
    (w, h), (left, bottom, right, top) = AXES_SIZE, _MARGINS
    top += 0.25 * title
    fig = Figure(figsize=(left + w + right, bottom + h + top), dpi=DPI)
    fw, fh = fig.get_size_inches()
    ax = fig.add_axes((left / fw, bottom / fh, w / fw, h / fh))
    return fig, ax


def _legend(fig: Figure, ax) -> None:
    """The legend of ``ax``: inside it for a few lines; else below it, in as many columns as fit
    the axes' width, the figure growing by the legend's height (and width, for labels wider than
    the axes) while the axes keep their size."""
    handles, labels = ax.get_legend_handles_labels()
    if len(labels) <= _INSIDE:
        ax.legend(fontsize=_LEGEND_FONT)
        return
    renderer = FigureCanvasAgg(fig).get_renderer()
    one_column = fig.legend(handles, labels, fontsize=_LEGEND_FONT, frameon=False)
    column = one_column.get_window_extent(renderer).width
    one_column.remove()
    box = ax.get_window_extent(renderer)
    ncol = max(1, min(len(labels), int(box.width // column)))
    legend = fig.legend(handles, labels, fontsize=_LEGEND_FONT, frameon=False, ncol=ncol, loc="upper center")
    size = legend.get_window_extent(renderer)
    gap = 0.1
    w_in, h_in = fig.get_size_inches()
    x0, y0, ax_w, ax_h = box.x0 / fig.dpi, box.y0 / fig.dpi, box.width / fig.dpi, box.height / fig.dpi
    legend_w, legend_h = size.width / fig.dpi, size.height / fig.dpi
    grow_w = max(0.0, legend_w + 2 * gap - w_in)
    new_w, new_h = w_in + grow_w, h_in + legend_h + 2 * gap
    fig.set_size_inches(new_w, new_h)
    ax.set_position(((x0 + grow_w / 2) / new_w, (y0 + legend_h + 2 * gap) / new_h, ax_w / new_w, ax_h / new_h))
    legend.set_bbox_to_anchor((0.5, (legend_h + gap) / new_h), transform=fig.transFigure)


def pr_figure(curves: Mapping[str, tuple[Sequence[float], Sequence[float]]]) -> Figure:
    """11-point interpolated precision-recall curves: ``{label: (recall levels, precision)}``."""
    fig, ax = _axes_figure()
    for (label, (recall, precision)), (color, dash) in zip(curves.items(), _styles(len(curves))):
        ax.plot(recall, precision, marker="o", markersize=3, color=color, linestyle=dash, label=label)
    ax.set_xlabel("recall")
    ax.set_ylabel("interpolated precision")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    _legend(fig, ax)
    return fig


def pr_curves(curves: Mapping[str, tuple[Sequence[float], Sequence[float]]]) -> bytes:
    """:func:`pr_figure` as PNG."""
    return _png(pr_figure(curves))


def lines_figure(series: Mapping[str, tuple[Sequence[float], Sequence[float]]], xlabel: str, ylabel: str = "MAP",
                 title: str | None = None, hline: tuple[str, float] | None = None, logx: bool = False) -> Figure:
    """One line per ``{label: (x, y)}``; ``hline`` = (label, y) draws a dashed reference (the baseline).
    With ``logx`` the x axis is logarithmic, ticked at the x values themselves."""
    fig, ax = _axes_figure(title=bool(title))
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
        _legend(fig, ax)
    return fig


def lines(series: Mapping[str, tuple[Sequence[float], Sequence[float]]], xlabel: str, ylabel: str = "MAP",
          title: str | None = None, hline: tuple[str, float] | None = None, logx: bool = False) -> bytes:
    """:func:`lines_figure` as PNG."""
    return _png(lines_figure(series, xlabel, ylabel, title, hline, logx))
