"""What a gLDA model file and checkpoint must hold: LDA's model files; the chain state is every
token's group, then every group's topic."""
from types import SimpleNamespace

import numpy as np

from ..common import file_specs as F
from ..common import validate as V
from ..lda.files import MODEL as LDA_MODEL, SPEC as LDA


def _glda_groups(name):
    def check(ctx):
        m, c = ctx.model, ctx.corpus
        gz = ctx.arrays[name]
        N = c.n_tokens
        g, zg = gz[:, :N].astype(np.int64), gz[:, N:]
        n_groups = np.diff(m._lay["grp_ptr"])[np.repeat(np.arange(c.n_docs), np.diff(c.doc_ptr))]
        if g.size and ((g < 0) | (g >= n_groups)).any():
            bad = g[(g < 0) | (g >= n_groups)][0]
            return f"{name} puts a token in group {bad}, outside its document's groups"
        if m.restricted:
            lay = m._lay
            tok_doc = np.repeat(np.arange(c.n_docs), np.diff(c.doc_ptr))
            want = lay["tok_run"] - lay["run_doc_first"][tok_doc]
            if not (g == want).all():
                return f"{name}: restricted LDA's groups are the (document, term) runs; these are not"
        if zg.size and (zg.min() < 0 or zg.max() >= m.n_topics):
            bad = zg.max() if zg.max() >= m.n_topics else zg.min()
            return f"{name} gives a group topic {bad}, outside [0, {m.n_topics}) topics"
        return None
    return check


def _glda_values(name, optional):
    def damage(ctx):  # the first group of chain 0 in a group beyond its document's
        gz = ctx.arrays[name].copy()
        d = np.searchsorted(ctx.corpus.doc_ptr, 0, side="right") - 1  # the first token's document
        gz[0, 0] = np.diff(ctx.model._lay["grp_ptr"])[d]
        return {name: gz}
    return (V.relation(name, "groups within their document, group topics in [0, topics)",
                       _glda_groups(name), damage, optional=optional),)


SPEC = V.Spec(
    model=LDA_MODEL,
    checkpoint=F.state_checks("gz", ("tokens+groups",), (np.int32, np.uint16),
                              _glda_values, "alpha", ("topics",), ("shards",)),
    dims=lambda m, h, c: {} if c is None else {"groups": int(m._lay["grp_ptr"][-1])},
    priors=LDA.priors)


def group_fault(model, corpus, gz):
    """What is wrong with the chain states ``gz`` (chains, tokens + groups) of ``model`` on
    ``corpus`` (a file's check above), or None."""
    return _glda_groups("gz")(SimpleNamespace(model=model, corpus=corpus, arrays={"gz": gz}))
