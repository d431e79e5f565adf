"""Console commands that show the scoring and the topic model: ``:why``, ``:doc``, ``:topic``
and ``:compare`` (a mixin of :class:`retrieval.ui.console.Session`)."""
from __future__ import annotations

import numpy as np

from ..core.plugins import hook
from ..core.scoring import explain
from ..experiments.compare import format_table
from .console_text import ConsoleError, Fragments, Result, highlight, match_words, parse_settings, settings_label


class ModelViews:
    @staticmethod
    def _p_tm(result: Result, doc: int) -> np.ndarray | None:
        if result.model is None:
            return None
        return np.asarray(result.model.p_w_d(result.query.term_ids), dtype=np.float64)[doc]

    def cmd_why(self, arg: str) -> Fragments:
        if self.last is None:
            raise ConsoleError(":why needs a query first")
        if not arg:
            raise ConsoleError(":why N explains hit N of the last query (or :why DOCNO)")
        r = self.last
        doc = self._doc_row(arg)
        rows = explain(self.stats, r.query, doc, r.mu, r.lam, self._p_tm(r, doc))
        total = sum(row.score for row in rows)
        where = np.flatnonzero(r.docs == doc)
        rank = f"hit {where[0] + 1}" if len(where) else "not in the top " + str(len(r.docs))
        mixed = r.lam < 1
        table = []
        for row in rows:
            cells = {"term": row.term, "qtf": f"{row.weight:g}", "tf": str(row.tf), "P_QL": f"{row.p_ql:.4e}"}
            if mixed:
                share = r.lam * row.p_ql / row.p
                cells |= {"P_TM": f"{row.p_tm:.4e}", f"{r.lam:g}*P_QL": f"{r.lam * row.p_ql:.4e}",
                          f"{1 - r.lam:g}*P_TM": f"{(1 - r.lam) * row.p_tm:.4e}", "QL share": f"{100 * share:.0f}%",
                          "P(w|d)": f"{row.p:.4e}"}
            cells |= {"qtf*log P": f"{row.score:.4f}"}
            table.append(cells)
        sum_row = {k: "" for k in table[0]}
        sum_row["term"], sum_row["qtf*log P"] = "total", f"{total:.4f}"
        table.append(sum_row)
        docno = self.stats.docnos[doc]
        head = (f"{docno} ({rank}) for {r.qid} {r.text!r}: |d| = {int(self.stats.doc_len[doc])} tokens, "
                f"{settings_label(r.mu, r.lam, r.model_name)}\n")
        formula = ("P(w|d) = lam*P_QL + (1-lam)*P_TM,  P_QL = (tf + mu*P(w|C)) / (|d| + mu)\n" if mixed
                   else "P(w|d) = P_QL = (tf + mu*P(w|C)) / (|d| + mu)\n")
        out = [("class:title", head), ("class:dim", formula), ("", format_table(table) + "\n")]
        if len(where):
            ranked_score = float(r.scores[where[0]])
            out.append(("class:dim", f"score in the ranking: {ranked_score:.4f}\n"))
            if abs(ranked_score - total) > 1e-9 * max(1.0, abs(total)):
                out.append(("class:dim", f"(the model's extra query parts, e.g. collocations, add "
                                         f"{ranked_score - total:+.4f})\n"))
        if r.expansion is not None:
            out += self.expansion_lines(r.expansion)
        if self.model is not None:
            out += self._doc_topics(doc)
        return out

    def _topic_text(self, k: int, words: int) -> str:
        lines = hook(self.model.kind, "topic_lines")  # e.g. TCM: a topic is a list of collocations
        if lines is not None:
            return " / ".join(lines(self.model, self.stats.terms, k, words))
        return " ".join(self.stats.terms[w] for w in self.model.topic_words(k, top=words)[0])

    def _doc_topics(self, doc: int, top: int = 3, words: int = 8) -> Fragments:
        topics, probs = self.model.doc_topics(doc, top=top)
        out = [("class:dim", f"top topics of {self.stats.docnos[doc]} ({self.model_name}):\n")]
        for k, p in zip(topics, probs):
            out.append(("", f"  topic {int(k):4d}  {p:.3f}  {self._topic_text(int(k), words)}\n"))
        return out

    def cmd_doc(self, arg: str) -> Fragments:
        if not arg:
            raise ConsoleError(":doc N shows hit N of the last query; :doc DOCNO any document")
        doc = self._doc_row(arg)
        docno = self.stats.docnos[doc]
        stored = self.index.document(docno)
        terms = set(self.last.query.terms) if self.last else set()
        body = stored.get("contents") or ""
        out = [("class:docno", docno), ("class:dim", f"  ({int(self.stats.doc_len[doc])} tokens indexed)\n")]
        title = (stored.get("title") or "").strip()
        if title:
            out += [("class:title", title), ("", "\n")]
            body = self._body(stored).lstrip("\n")
        out += highlight(body, match_words(body, terms, self.analyze_word))
        out.append(("", "\n"))
        if self.model is not None:
            out += self._doc_topics(doc)
        return out

    def cmd_topic(self, arg: str) -> Fragments:
        if self.model is None:
            raise ConsoleError(":topic needs a topic model; load one with :model DIR")
        n = int(self.model.n_topics)
        try:
            k = int(arg)
        except ValueError:
            raise ConsoleError(f":topic K takes a topic number in [0, {n}), got {arg!r}") from None
        if not 0 <= k < n:
            raise ConsoleError(f"topic must be in [0, {n}), got {k}")
        if hook(self.model.kind, "topic_lines") is not None:
            return [("class:title", f"topic {k} of {n} ({self.model_name})\n"), ("", self._topic_text(k, 20) + "\n")]
        term_ids, probs = self.model.topic_words(k, top=20)
        rows = [{"term": self.stats.terms[w], "P(w|topic)": f"{p:.4f}"} for w, p in zip(term_ids, probs)]
        return [("class:title", f"topic {k} of {n} ({self.model_name})\n"), ("", format_table(rows) + "\n")]

    def cmd_compare(self, arg: str) -> Fragments:
        parts = arg.split(None, 2)
        if len(parts) < 2 or "=" not in parts[0] or "=" not in parts[1]:
            raise ConsoleError("usage: :compare lam=0.7 lam=1 [QUERY]  (settings: lam=X and/or mu=X, joined by ',')")
        a, b = parse_settings(parts[0]), parse_settings(parts[1])
        if len(parts) == 3:
            qid, text = self._resolve(parts[2])
        elif self.last is not None:
            qid, text = self.last.qid, self.last.text
        else:
            raise ConsoleError(":compare needs a QUERY (or a query before it)")
        ra = self.rank(text, qid or "", a.get("mu", self.mu), a.get("lam", self.lam))
        rb = self.rank(text, qid or "", b.get("mu", self.mu), b.get("lam", self.lam))
        return self.format_compare(ra, rb)

    def format_compare(self, ra: Result, rb: Result) -> Fragments:
        docnos = self.stats.docnos
        n = self.hits
        rank_a = {int(d): i for i, d in enumerate(ra.docs)}
        judged = self._judged(ra) or {}
        la, lb = settings_label(ra.mu, ra.lam, ra.model_name), settings_label(rb.mu, rb.lam, rb.model_name)
        docw = max(len(docnos[d]) for d in np.concatenate([ra.docs[:n], rb.docs[:n]]))
        col = max(docw + 14, len(la) + 3)  # "R " + docno + score, or the header
        out: Fragments = [("class:query", ra.text), ("class:dim", f"  [{' '.join(ra.query.terms)}]\n")]
        if self.model is None and ra.mu == rb.mu:
            out.append(("class:warn", "no model loaded: lam has no effect, both sides are the same QL ranking\n"))
        out.append(("class:title", f"{'':5}{('A: ' + la).ljust(col)}   B: {lb}\n"))

        def cell(d: int, score: float) -> str:
            return f"{'R' if judged.get(docnos[d], 0) > 0 else ' '} {docnos[d].ljust(docw)} {score:10.4f}"

        for i in range(min(n, len(ra.docs))):
            da, db = int(ra.docs[i]), int(rb.docs[i])
            if db in rank_a:
                move = rank_a[db] - i
                delta = "=" if move == 0 else (f"\u2191{move}" if move > 0 else f"\u2193{-move}")
            else:
                delta = "new"
            out += [("class:rank", f"{i + 1:3d}  "), ("", cell(da, ra.scores[i]).ljust(col) + "   "),
                    ("class:docno" if delta == "=" else "class:changed", cell(db, rb.scores[i])),
                    ("class:dim", f"  {delta}\n")]
        overlap = len(set(ra.docs[:n].tolist()) & set(rb.docs[:n].tolist()))
        summary = f"top {n} overlap {overlap}/{min(n, len(ra.docs))}"
        ma, mb = self._measures(ra), self._measures(rb)
        if ma:
            summary += f";  A: {ma};  B: {mb}"
        out.append(("class:dim", summary + "  (B's arrows: move against A)\n"))
        return out
