"""What an aviPAM model file must hold (the network state is checked against the header's
architecture as well): the table of :mod:`models.common.validate` checks every load runs before
the file is used."""
import numpy as np

from ..common import validate as V


_product = V.When("decoder='product'", lambda m: m.decoder == "product")
_mixture = V.When("decoder='mixture'", lambda m: m.decoder != "product")


def _empty(name):
    return V.array(name, (0,), (np.float32, np.float64), when=_mixture)


def _chain_topics(model, header, corpus):
    """aviPAM keeps every chain's sub-topics side by side."""
    return {"topics": int(model.n_chains) * int(model.n_topics), "chains": int(model.n_chains)}


SPEC = V.Spec(
    model=(
        V.array("topic_word", ("topics", "terms"), np.float64), V.finite("topic_word", nonneg=True),
        V.row_sums("topic_word", lambda ctx: 1.0),
        V.array("doc_mix", ("documents", "topics"), np.float64), V.documents("doc_mix"),
        V.finite("doc_mix", nonneg=True),
        # the chains' mixtures side by side, each weighted 1 / chains
        V.row_sums("doc_mix", lambda ctx: 1.0 / ctx.dims["chains"], "1 / chains", blocks="chains"),
        *(_empty(n) for n in ("beta", "dec_shift", "dec_scale", "doc_div", "doc_lse")),
        V.array("beta", ("topics", "terms"), np.float32, when=_product),
        V.array("dec_shift", ("terms",), np.float64, when=_product),
        V.array("dec_scale", ("terms",), np.float64, when=_product),
        V.array("doc_div", ("documents",), np.float64, when=_product),
        V.array("doc_lse", ("documents",), np.float64, when=_product),
        *(V.finite(n, when=_product) for n in ("beta", "dec_shift", "dec_scale", "doc_lse")),
        V.finite_pos("doc_div", when=_product),
    ),
    checkpoint=(),
    dims=_chain_topics, priors=(("alpha", False), ("alpha_root", True), ("eta", False)))
