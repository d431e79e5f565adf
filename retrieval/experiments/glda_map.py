"""MAP of QL, LDA smoothing and gLDA smoothing on the shared collections, one command:

    topicir reproduce glda-map --data ../shared/data --k 100 --lam 0.5 0.7 0.9

Both models are trained through the registry (``train_model(index, kind, ...)``, kept under
``<index>/models/`` and reused) with the smoothing table's schedule (3 chains, 100 sweeps, a
sample every 10 after 50, seed 0) unless told otherwise; gLDA's P(w | d) is LDA's formula over
its token-level counts. Columns as ``topicir reproduce smoothing``: QL, each kind at K and lam = 0.7, and
with K and lam chosen by leave-one-collection-out.
"""
from pathlib import Path

from ..core.tables import Table
from .regressions import COLLECTIONS
from .smoothing import TRAIN, comparison_table


def run(*, data="../shared/data", indexes="indexes", collections=COLLECTIONS, k=(100,), lam=(0.5, 0.7, 0.9),
        mu: float = 1000.0, chains: int = TRAIN["n_chains"], iterations: int = TRAIN["n_iter"],
        burn_in: int = TRAIN["burn_in"], sample_every: int = TRAIN["sample_every"]) -> list[Table]:
    """MAP of QL, LDA and gLDA smoothing on the shared ``collections`` (K and lam by LOCO)."""
    train = dict(TRAIN, n_chains=chains, n_iter=iterations, burn_in=burn_in, sample_every=sample_every)
    rows = comparison_table(Path(data), list(collections), Path(indexes), ["lda", "glda"], ks=tuple(k),
                            lams=tuple(lam), mu=mu, train=train)
    return [Table(f"MAP: QL vs LDA vs gLDA smoothing (title queries, mu={mu:g}, {chains} chains, {iterations} "
                  f"sweeps); LOCO = K and lam chosen on the other collections", rows)]
