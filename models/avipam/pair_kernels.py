"""The mixture decoder's likelihood at a batch's (document, term) pairs with M-step topics, and
the E-step's expected counts, in one pass (arrays in, arrays out; no I/O).

For the entry e of document d and term w with count c_e, p_e = sum_k mix_dk phi_kw. One pass
gives every document's log-likelihood sum_e c_e log(p_e + 1e-10), the gradient of that sum with
respect to mix_d, sum_e c_e / (p_e + 1e-10) phi_kw, and adds the entry's topic responsibilities
c_e mix_dk phi_kw / (p_e + 1e-10) to the epoch's counts of term w. Entries are visited in batch
order, one thread, so the counts are summed in one order.
"""
import math

import numpy as np

from ..common.jit import njit


# reassoc: the K-term sums are vectorised (a fixed order for a given build, whatever the threads)
@njit(cache=True, nogil=True, fastmath={"contract", "reassoc"})
def pair_pass(starts, cols, counts, mix, phi_rows, em_counts, log_lik, grad_mix):
    """starts (B,), cols, counts (nnz,): the batch's entries, document by document; mix (B, K);
    phi_rows (V, K) the topics term-major. Overwrites log_lik (B,) and grad_mix (B, K), adds to
    em_counts (V, K) (float32 arrays; the log-likelihood summed in float64)."""
    B, K = mix.shape
    nnz = len(cols)
    acc = np.empty(K, dtype=np.float32)
    for d in range(B):
        end = starts[d + 1] if d + 1 < B else nnz
        acc[:] = 0.0
        ll = 0.0
        md = mix[d]
        for e in range(starts[d], end):
            pw = phi_rows[cols[e]]
            p = np.float32(0.0)
            for k in range(K):
                p += md[k] * pw[k]
            p += np.float32(1e-10)
            scale = counts[e] / p
            ll += counts[e] * math.log(p)
            ew = em_counts[cols[e]]
            for k in range(K):
                f = pw[k] * scale
                acc[k] += f
                ew[k] += md[k] * f
        log_lik[d] = ll
        grad_mix[d, :] = acc
