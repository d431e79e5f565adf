"""Slow, obvious TCM fold-in conditional written from the model: the joint probability of a new
document's segmentation and collocation topics with a kept sample's restaurants fixed,

    p(b) = Gamma(K alpha) / Gamma(N + K alpha) prod_k Gamma(n_dk + alpha) / Gamma(alpha)
           * prod_{collocations c with topic k} (n_kc + alpha0 P0(c)) / (n_k + alpha0),

(theta integrated out; P0(c) = 0 beyond max_len; a collocation that crosses a split, a token i
with split[i] = 1 before its last token, has probability 0), and the conditional of one
boundary variable as the joint at each of its values, normalised.
"""
import math

import numpy as np


def p_col(model, cs, terms, k):
    """P(c | k) of the collocation ``terms`` under kept sample cs."""
    m = len(terms)
    if m > model.max_len:
        return 0.0
    a0 = model.alpha0_samples_[cs]
    t = model.find_collocation(terms)
    n = 0
    if t >= 0:
        lo, hi = model.ct_ptr_[cs], model.ct_ptr_[cs + 1]
        for e in range(lo, hi):
            if model.ct_type_[e] == t and model.ct_topic_[e] == k:
                n = model.ct_count_[e]
    return (n + a0 * model.p0_len_[m]) / (model.n_k_samples_[cs, k] + a0)


def collocations(b):
    """(start, end, topic) of every collocation of boundary variables ``b``."""
    out, s = [], 0
    for i, v in enumerate(b):
        if v >= 0:
            out.append((s, i, v))
            s = i + 1
    return out


def log_joint(model, cs, terms, b, split=None):
    K, alpha = model.n_topics, float(model.alpha_)
    cols = collocations(b)
    ndk = np.zeros(K, dtype=np.int64)
    out = 0.0
    for s, e, k in cols:
        crosses = split is not None and any(split[i] for i in range(s, e))
        p = 0.0 if crosses else p_col(model, cs, terms[s:e + 1], k)
        if p == 0.0:
            return -math.inf
        out += math.log(p)
        ndk[k] += 1
    out += math.lgamma(K * alpha) - math.lgamma(len(cols) + K * alpha)
    return out + sum(math.lgamma(n + alpha) - math.lgamma(alpha) for n in ndk)


def conditional(model, cs, terms, b, j, split=None):
    """p(b_j = k) for k = 0..K-1 and, unless j is the last token, p(b_j = none) last (0 where
    ``split`` cuts after token j)."""
    values = list(range(model.n_topics)) + ([-1] if j < len(terms) - 1 else [])
    logs = []
    for v in values:
        bb = list(b)
        bb[j] = v
        logs.append(log_joint(model, cs, terms, bb, split))
    top = max(logs)
    p = [math.exp(x - top) for x in logs]
    s = math.fsum(p)
    return np.array([x / s for x in p])
