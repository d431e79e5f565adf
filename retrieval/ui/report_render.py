"""The document of a report: sections of tables, figures and text, rendered as self-contained
HTML and as Markdown."""
from __future__ import annotations

import base64
import html
import math
import re
from pathlib import Path
from typing import NamedTuple

from models.common.atomic import atomic_open


class Table(NamedTuple):
    header: list[str]
    rows: list[list[str]]
    caption: str = ""
    bold: frozenset = frozenset()   # (row, column) cells to emphasise
    collapsed: bool = False         # HTML: inside <details>


class Plot(NamedTuple):
    name: str       # file stem under plots/
    png: bytes
    caption: str


class Para(NamedTuple):
    text: str
    code: bool = False


class Section(NamedTuple):
    title: str
    anchor: str
    blocks: list


def _fmt(value: float, digits: int = 4) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def _fmt_p(p: float) -> str:
    if math.isnan(p):
        return "n/a"
    return "<0.0001" if p < 1e-4 else f"{p:.4f}"


def _num(x: float) -> str:
    return f"{x:g}"


# -- rendering -------------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1100px;
  color:#222;padding:0 1em}
h1{font-size:1.6em}h2{font-size:1.25em;border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.8em 0;font-size:.9em}th,td{border:1px solid #ccc;padding:.25em .6em}
th{background:#f2f2f2}td.num{text-align:right;font-variant-numeric:tabular-nums}
caption{text-align:left;color:#555;padding:.2em 0}
code,pre{background:#f6f6f6;padding:.1em .3em}pre{padding:.6em;white-space:pre-wrap;word-break:break-all}
img{max-width:100%}figure{margin:1em 0}figcaption{color:#555;font-size:.9em}nav a{margin-right:1em}
p.note{color:#555;font-size:.9em}
"""
_OWN_PLOT = re.compile(r"(topic_differences|precision_recall|iterations|sweep\d+_(mu|lam))\.png")
_NUMERIC = re.compile(r"^[+-]?(\d[\d.,]*|n/a|<0\.0001)[%\u2020\u2021]*$|^\d+ / \d+ / \d+$")


def _html_table(t: Table) -> str:
    out = ["<table>"]
    if t.caption:
        out.append(f"<caption>{html.escape(t.caption)}</caption>")
    out.append("<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in t.header) + "</tr>")
    for i, row in enumerate(t.rows):
        cells = []
        for j, c in enumerate(row):
            text = html.escape(c)
            if (i, j) in t.bold:
                text = f"<b>{text}</b>"
            cls = ' class="num"' if _NUMERIC.match(c) else ""
            cells.append(f"<td{cls}>{text}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    table = "\n".join(out)
    if t.collapsed:
        return f"<details><summary>{html.escape(t.caption or 'table')}</summary>\n{table}\n</details>"
    return table


def render_html(title: str, intro: list, sections: list[Section]) -> str:
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{html.escape(title)}</title>", f"<style>{_CSS}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>"]
    parts.append("<nav>" + "".join(f'<a href="#{s.anchor}">{html.escape(s.title)}</a>' for s in sections) + "</nav>")

    def block(b) -> str:
        if isinstance(b, Table):
            return _html_table(b)
        if isinstance(b, Plot):
            data = base64.b64encode(b.png).decode("ascii")
            return (f'<figure><img alt="{html.escape(b.caption)}" src="data:image/png;base64,{data}">'
                    f"<figcaption>{html.escape(b.caption)}</figcaption></figure>")
        return f"<pre>{html.escape(b.text)}</pre>" if b.code else f'<p class="note">{html.escape(b.text)}</p>'

    parts += [block(b) for b in intro]
    for s in sections:
        parts.append(f'<h2 id="{s.anchor}">{html.escape(s.title)}</h2>')
        parts += [block(b) for b in s.blocks]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown(title: str, intro: list, sections: list[Section], plot_dir: str = "plots") -> str:
    def block(b) -> str:
        if isinstance(b, Table):
            head = [f"*{b.caption}*", ""] if b.caption else []
            rows = [[f"**{_md_cell(c)}**" if (i, j) in b.bold else _md_cell(c) for j, c in enumerate(r)]
                    for i, r in enumerate(b.rows)]
            align = ["---"] + ["---:" if all(_NUMERIC.match(r[j]) for r in b.rows if r[j]) else "---"
                               for j in range(1, len(b.header))]
            lines = ["| " + " | ".join(map(_md_cell, b.header)) + " |", "|" + "|".join(align) + "|"]
            lines += ["| " + " | ".join(r) + " |" for r in rows]
            return "\n".join(head + lines)
        if isinstance(b, Plot):
            return f"![{b.caption}]({plot_dir}/{b.name}.png)"
        return f"    {b.text}" if b.code else b.text

    parts = [f"# {title}", ""] + [block(b) + "\n" for b in intro]
    for s in sections:
        parts += [f"## {s.title}", ""] + [block(b) + "\n" for b in s.blocks]
    return "\n".join(parts)


def _write_text(path: Path, text: str) -> None:
    with atomic_open(path, "w", encoding="utf-8") as f:
        f.write(text)
