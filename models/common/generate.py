"""Documents drawn from a trained model, for the empirical likelihood (Li & McCallum 2006,
section 4.2; Wallach et al. 2009): a held-out document's probability is the mean of its
likelihood under the word distributions of many documents drawn from the model."""
import numpy as np


def log_dirichlet(rng, alpha, size):
    """log of Dirichlet(alpha) draws, shape (size, len(alpha)), stable for tiny alpha:
    log Gamma(a) = log Gamma(a + 1) + log(U) / a (Marsaglia & Tsang's boost)."""
    from scipy.special import logsumexp  # here, not above: ranking imports this module, and scipy.special loads slowly

    alpha = np.asarray(alpha, dtype=np.float64)
    g = np.log(rng.gamma(alpha + 1.0, size=(size, len(alpha)))) + np.log(rng.random((size, len(alpha)))) / alpha
    return g - logsumexp(g, axis=1, keepdims=True)


def over_kept_samples(n_kept, n_docs, draw):
    """Document m uses kept sample m mod ``n_kept`` (chains and samples in turn); ``draw(cs, m)``
    returns the (m, V) word distributions of m documents of kept sample cs. Rows come grouped
    by kept sample."""
    out = [draw(cs, len(range(cs, n_docs, n_kept))) for cs in range(n_kept) if cs < n_docs]
    return np.vstack(out)
