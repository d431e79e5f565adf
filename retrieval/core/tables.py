"""Tables of measured figures, as benchmarks and reproductions return them: printed as plain
text on a terminal, written as Markdown under docs/results (``topicir ... --write``)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Table:
    """Rows of one table (the first key of the rows is the label column); ``notes`` are lines
    shown under it (settings, caveats), ``digits`` the decimals of float cells; ``means``: the
    cells are means over topics, so an AP column is headed MAP (a per-topic table keeps AP)."""

    title: str
    rows: list[dict]
    notes: list[str] = field(default_factory=list)
    digits: int = 4
    means: bool = True

    def _cells(self) -> tuple[list[str], list[list[str]]]:
        keys = list(self.rows[0]) if self.rows else []
        header = [keys[0]] + ["MAP" if k == "AP" and self.means else k for k in keys[1:]] if keys else []
        cells = [[self._cell(r.get(k, "")) for k in keys] for r in self.rows]
        return header, cells

    def _cell(self, value) -> str:
        if isinstance(value, float):
            return f"{value:.{self.digits}f}"
        return "" if value is None else str(value)

    def text(self) -> str:
        """A plain-text table: the title, aligned columns, the notes."""
        out = [self.title] if self.title else []
        header, cells = self._cells()
        if header:
            widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(header)]
            line = lambda cs: "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                        for i, (c, w) in enumerate(zip(cs, widths)))
            out += [line(header), "  ".join("-" * w for w in widths)] + [line(c) for c in cells]
        return "\n".join(out + list(self.notes))

    def markdown(self) -> str:
        """A Markdown section: the title as a heading, a pipe table, the notes as a paragraph."""
        out = [f"## {self.title}", ""] if self.title else []
        header, cells = self._cells()
        if header:
            esc = lambda c: c.replace("|", "\\|")
            right = [i > 0 and all(_numeric(c[i]) for c in cells) for i in range(len(header))]
            out += ["| " + " | ".join(map(esc, header)) + " |",
                    "|" + "|".join("---:" if r else "---" for r in right) + "|"]
            out += ["| " + " | ".join(map(esc, c)) + " |" for c in cells]
            out.append("")
        if self.notes:
            out += [line + "  " if i < len(self.notes) - 1 else line for i, line in enumerate(self.notes)]
            out.append("")
        return "\n".join(out)


def fixed(value: float, digits: int) -> str:
    """``value`` with ``digits`` decimals, for a column whose precision differs from the table's."""
    return f"{value:.{digits}f}"


def _numeric(cell: str) -> bool:
    """A cell to align right: a number, possibly with a unit (``3.2x``, ``12%``), or empty."""
    text = cell.strip().rstrip("x%").replace(",", "")
    try:
        float(text)
    except ValueError:
        return text in ("", "-")
    return True
