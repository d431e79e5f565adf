"""MAP of QL, LDA smoothing and gLDA smoothing on the shared collections, one command:

    python -m retrieval.experiments.glda_map --data ../shared/data --k 100 --lam 0.5 0.7 0.9

Both models are trained through the registry (``train_model(index, kind, ...)``, kept under
``<index>/models/`` and reused) with the smoothing table's schedule (3 chains, 100 sweeps, a
sample every 10 after 50, seed 0) unless told otherwise; gLDA's P(w | d) is LDA's formula over
its token-level counts. Columns as ``topicir smoothing``: QL, each kind at K and lam = 0.7, and
with K and lam chosen by leave-one-collection-out.
"""
import argparse
import logging
from pathlib import Path

from .compare import format_table
from .pam_eval import smoothing_comparison
from .regressions import COLLECTIONS
from .smoothing import TRAIN


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m retrieval.experiments.glda_map",
                                description=__doc__.split("\n")[0])
    p.add_argument("--data", default="../shared/data", type=Path)
    p.add_argument("--indexes", default="indexes", type=Path)
    p.add_argument("--collections", nargs="+", default=list(COLLECTIONS))
    p.add_argument("--k", type=int, nargs="+", default=[100])
    p.add_argument("--lam", type=float, nargs="+", default=[0.5, 0.7, 0.9])
    p.add_argument("--mu", type=float, default=1000.0)
    p.add_argument("--chains", type=int, default=TRAIN["n_chains"])
    p.add_argument("--iterations", type=int, default=TRAIN["n_iter"])
    p.add_argument("--burn-in", type=int, default=TRAIN["burn_in"])
    p.add_argument("--sample-every", type=int, default=TRAIN["sample_every"])
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    train = dict(TRAIN, n_chains=args.chains, n_iter=args.iterations, burn_in=args.burn_in,
                 sample_every=args.sample_every)
    rows = smoothing_comparison(args.data, args.collections, args.indexes, ks=tuple(args.k),
                                lams=tuple(args.lam), mu=args.mu, train=train, kinds=("lda", "glda"))
    print(format_table(rows, title=f"MAP: QL vs LDA vs gLDA smoothing (title queries, mu={args.mu:g}, "
                                   f"{args.chains} chains, {args.iterations} sweeps); LOCO = K and lam "
                                   f"chosen on the other collections"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
