"""Slow, obvious grouped-LDA Gibbs sampler written straight from Bart (2011), eq. 2 and 3.

Dense counts rebuilt from the state, Python loops, the Gamma ratios of eq. 3 as sums of logs
(log Gamma(x + n) - log Gamma(x) = sum_j log(x + j), exact where lgamma differences of large
arguments lose digits). It visits tokens and groups in the fast sampler's order and draws from the
same rng functions, so with equal state it must reproduce the fast sampler's sweep.

State: ``g`` (group of every token, numbered within its document), ``zg`` (topic of every group;
the groups of doc d are ``grp_ptr[d]:grp_ptr[d + 1]``). ``restricted``: theta draws tokens and
the groups are fixed (restricted LDA), so eq. 3's doc factor becomes LDA's block conditional
Gamma(alpha + N_dz + n) / Gamma(alpha + N_dz) over token counts.
"""
import math

import numpy as np

from models.glda.kernels import LINEAR_MAX
from models.common.kernels.rng import randint, uniform


def token_topics(doc_ptr, grp_ptr, g, zg):
    z = np.empty(len(g), dtype=np.int64)
    for d in range(len(doc_ptr) - 1):
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            z[i] = zg[grp_ptr[d] + g[i]]
    return z


def counts(doc_ptr, term_ids, grp_ptr, g, zg, n_topics, n_terms):
    """Dense n_kw (V, K), n_k (K,), token counts n_dk (D, K) and group counts m_dk (D, K) of
    the groups with a topic (-1: not drawn yet, counted nowhere)."""
    D = len(doc_ptr) - 1
    z = token_topics(doc_ptr, grp_ptr, g, zg)
    n_kw = np.zeros((n_terms, n_topics), dtype=np.int64)
    n_dk = np.zeros((D, n_topics), dtype=np.int64)
    m_dk = np.zeros((D, n_topics), dtype=np.int64)
    for d in range(D):
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            if z[i] >= 0:
                n_kw[term_ids[i], z[i]] += 1
                n_dk[d, z[i]] += 1
        for h in range(grp_ptr[d], grp_ptr[d + 1]):
            if zg[h] >= 0:
                m_dk[d, zg[h]] += 1
    return n_kw, n_kw.sum(0), n_dk, m_dk


def _log_rising(x, n):
    return math.fsum(math.log(x + j) for j in range(n))


def eq2_probs(i, d, doc_ptr, term_ids, grp_ptr, g, zg, n_topics, n_terms, beta):
    """p(g_i = h | rest) ~ (beta + N_{z_h, y}^{-i}) / (beta Y + N_{z_h, .}^{-i}) over the doc's
    groups h (eq. 2), normalised: ndarray (G_d,)."""
    n_kw, n_k, _, _ = counts(doc_ptr, term_ids, grp_ptr, g, zg, n_topics, n_terms)
    y, k_i = term_ids[i], zg[grp_ptr[d] + g[i]]
    n_kw[y, k_i] -= 1
    n_k[k_i] -= 1
    p = [(beta + n_kw[y, zg[h]]) / (beta * n_terms + n_k[zg[h]])
         for h in range(grp_ptr[d], grp_ptr[d + 1])]
    s = math.fsum(p)
    return np.array([x / s for x in p])


def eq2_parts(i, d, doc_ptr, term_ids, grp_ptr, g, zg, n_topics, n_terms, beta):
    """Eq. 2 summed over the groups of each of the doc's topics (increasing), token i removed,
    split as the sparse sampler draws it: (word, smooth, topics) with word_k = G_k N_ky /
    (bY + N_k) and smooth_k = beta G_k / (bY + N_k), G_k the doc's groups of topic k."""
    n_kw, n_k, _, _ = counts(doc_ptr, term_ids, grp_ptr, g, zg, n_topics, n_terms)
    y, k_i = term_ids[i], zg[grp_ptr[d] + g[i]]
    n_kw[y, k_i] -= 1
    n_k[k_i] -= 1
    groups = [int(zg[h]) for h in range(grp_ptr[d], grp_ptr[d + 1])]
    topics = sorted(set(groups))
    word = [groups.count(k) * n_kw[y, k] / (beta * n_terms + n_k[k]) for k in topics]
    smooth = [beta * groups.count(k) / (beta * n_terms + n_k[k]) for k in topics]
    return word, smooth, topics


def _without_group(h, d, doc_ptr, term_ids, grp_ptr, g, zg, n_topics, n_terms):
    """The counts with group h of document d removed, its size n and word counts N_dhy."""
    n_kw, n_k, n_dk, m_dk = counts(doc_ptr, term_ids, grp_ptr, g, zg, n_topics, n_terms)
    k_h = zg[grp_ptr[d] + h]
    members = [i for i in range(doc_ptr[d], doc_ptr[d + 1]) if g[i] == h]
    n = len(members)
    n_dhy = {}
    for i in members:
        n_dhy[term_ids[i]] = n_dhy.get(term_ids[i], 0) + 1
    if k_h >= 0:  # a group not drawn yet is in no count
        for i in members:
            n_kw[term_ids[i], k_h] -= 1
        n_k[k_h] -= n
        n_dk[d, k_h] -= n
        m_dk[d, k_h] -= 1
    return n_kw, n_k, n_dk, m_dk, n, n_dhy


def eq3_probs(h, d, doc_ptr, term_ids, grp_ptr, g, zg, n_topics, n_terms, alpha, beta,
              restricted=False, doc_counts="groups"):
    """p(z_{d,h} = k | rest) of eq. 3 with all tokens of group h removed, normalised: (K,).

    (alpha + M_dk^{-h}) * Gamma(bY + N_k) / Gamma(bY + N_k + N_dh)
        * prod_y Gamma(b + N_ky + N_dhy) / Gamma(b + N_ky),
    M_dk counting groups (theta draws groups); restricted LDA: Gamma(alpha + N_dk + N_dh) /
    Gamma(alpha + N_dk) over token counts instead of the first factor; ``doc_counts="tokens"``:
    alpha + N_dk^{-h} (token counts) in the first factor."""
    n_kw, n_k, n_dk, m_dk, n, n_dhy = _without_group(h, d, doc_ptr, term_ids, grp_ptr, g, zg,
                                                      n_topics, n_terms)
    logs = []
    for k in range(n_topics):
        if restricted:
            lw = _log_rising(alpha[k] + n_dk[d, k], n)
        elif doc_counts == "tokens":
            lw = math.log(alpha[k] + n_dk[d, k])
        else:
            lw = math.log(alpha[k] + m_dk[d, k])
        lw -= _log_rising(beta * n_terms + n_k[k], n)
        lw += math.fsum(_log_rising(beta + n_kw[y, k], c) for y, c in n_dhy.items())
        logs.append(lw)
    top = max(logs)
    p = [math.exp(v - top) for v in logs]
    s = math.fsum(p)
    return np.array([x / s for x in p])


def _rising(x, n):
    return math.prod(x + j for j in range(n))


def eq3_parts(h, d, doc_ptr, term_ids, grp_ptr, g, zg, n_topics, n_terms, alpha, beta,
              restricted=False, doc_counts="groups"):
    """Eq. 3's unnormalised weights of group h (tokens removed) split as the sparse sampler
    draws them: (word, doc, smooth), three lists over the topics whose sum is the weight
    (a_k + b_k) prod_y rising(beta + N_ky, N_dhy) / rising(bY + N_k, n). With A the same
    product at N_ky = 0 and R_k = rising(bY + N_k, n): word_k = (a_k + b_k)(prod - A) / R_k (zero
    unless a word of the group has a count in k), doc_k = b_k A / R_k (zero unless the doc's
    other groups hold k), smooth_k = a_k A / R_k. a_k = alpha_k, b_k = M_dk (groups) or N_dk
    (doc_counts="tokens"); restricted LDA: a_k = rising(alpha_k, n), b_k = rising(alpha_k + N_dk,
    n) - a_k."""
    n_kw, n_k, n_dk, m_dk, n, n_dhy = _without_group(h, d, doc_ptr, term_ids, grp_ptr, g, zg,
                                                      n_topics, n_terms)
    A = math.prod(_rising(beta, c) for c in n_dhy.values())
    word, doc, smooth = [], [], []
    for k in range(n_topics):
        m = n_dk[d, k] if (restricted or doc_counts == "tokens") else m_dk[d, k]
        a = _rising(alpha[k], n) if restricted else alpha[k]
        b = 0.0 if m == 0 else (_rising(alpha[k] + m, n) - a if restricted else float(m))
        prod = math.prod(_rising(beta + n_kw[y, k], c) for y, c in n_dhy.items())
        r = _rising(beta * n_terms + n_k[k], n)
        word.append((a + b) * (prod - A) / r)
        doc.append(b * A / r)
        smooth.append(a * A / r)
    return word, doc, smooth


def _draw_parts(*parts_and_u01):
    """One uniform over the parts' totals; the topic within the part it falls in (each part's
    topics in increasing order)."""
    *parts, u01 = parts_and_u01
    totals = [math.fsum(p) for p in parts]
    u = u01 * sum(totals)
    for p, t in zip(parts[:-1], totals):
        if u < t:
            return _first_above(p, u)
        u -= t
    return _first_above(parts[-1], u)


def refine(i, h_drawn, k0, d, doc_ptr, term_ids, grp_ptr, g, zg):
    """Among the doc's groups of topic k0, the one with the most other instances of token i's
    term; the drawn group keeps the token on a tie with the maximum, else the lowest index."""
    G = grp_ptr[d + 1] - grp_ptr[d]
    cnt = [0] * G
    for j in range(doc_ptr[d], doc_ptr[d + 1]):
        if j != i and term_ids[j] == term_ids[i] and zg[grp_ptr[d] + g[j]] == k0:
            cnt[g[j]] += 1
    best = max(cnt[h] for h in range(G) if zg[grp_ptr[d] + h] == k0)
    if cnt[h_drawn] == best:
        return h_drawn
    return min(h for h in range(G) if zg[grp_ptr[d] + h] == k0 and cnt[h] == best)


def _first_above(p, u):
    acc = 0.0
    for j, x in enumerate(p):
        acc += x
        if u < acc:
            return j
    return max(j for j, x in enumerate(p) if x > 0)


def sweep(doc_ptr, term_ids, grp_ptr, g, zg, n_topics, n_terms, alpha, beta, rng_state,
          restricted=False, doc_counts="groups", docs=None):
    """One sequential sweep in the fast sampler's order: per document, every token's group in
    position order (eq. 2: the topic from the probabilities summed over its groups, split as
    :func:`eq2_parts`, then the drawn group among that topic's groups uniformly, then the
    refinement), then every group's topic (:func:`_draw_group_topics`). Returns new (g, zg);
    advances rng_state. ``docs`` (d0, d1): sweep those documents only, the others' state
    staying in the counts (a document shard's sweep against the chain's counts)."""
    g, zg = np.array(g, dtype=np.int64), np.array(zg, dtype=np.int64)
    for d in range(*(docs or (0, len(doc_ptr) - 1))):
        g0, G = grp_ptr[d], grp_ptr[d + 1] - grp_ptr[d]
        if not restricted:
            for i in range(doc_ptr[d], doc_ptr[d + 1]):
                word, smooth, topics = eq2_parts(i, d, doc_ptr, term_ids, grp_ptr, g, zg, n_topics,
                                                 n_terms, beta)
                k0 = topics[_draw_parts(word, smooth, uniform(rng_state))]
                of_k0 = [h for h in range(G) if zg[g0 + h] == k0]
                h_drawn = of_k0[randint(rng_state, len(of_k0))]
                g[i] = refine(i, h_drawn, k0, d, doc_ptr, term_ids, grp_ptr, g, zg)
        _draw_group_topics(d, doc_ptr, term_ids, grp_ptr, g, zg, n_topics, n_terms, alpha, beta,
                           rng_state, restricted, doc_counts)
    return g, zg


def _draw_group_topics(d, doc_ptr, term_ids, grp_ptr, g, zg, n_topics, n_terms, alpha, beta,
                       rng_state, restricted, doc_counts):
    """Every group's topic of document d in group order (eq. 3: for groups of at most
    LINEAR_MAX tokens from its sparse part, else its smoothing part, as :func:`eq3_parts`);
    overwrites zg's entries of d."""
    g0, G = grp_ptr[d], grp_ptr[d + 1] - grp_ptr[d]
    for h in range(G):
        args = (h, d, doc_ptr, term_ids, grp_ptr, g, zg, n_topics, n_terms, alpha, beta,
                restricted, doc_counts)
        if np.sum(g[doc_ptr[d]:doc_ptr[d + 1]] == h) <= LINEAR_MAX:
            zg[g0 + h] = _draw_parts(*eq3_parts(*args), uniform(rng_state))
        else:  # long groups: the whole conditional, topics in increasing order
            zg[g0 + h] = _first_above(eq3_probs(*args), uniform(rng_state))


def online_pass(doc_ptr, term_ids, grp_ptr, g, n_topics, n_terms, alpha, beta, rng_state,
                restricted=False, doc_counts="groups"):
    """The online start: with the groups ``g`` fixed and no group drawn, every group's topic in
    document and group order from eq. 3 given the groups drawn before it (drawn as
    :func:`sweep` draws it). Returns zg; advances rng_state."""
    zg = np.full(grp_ptr[-1], -1, dtype=np.int64)
    for d in range(len(doc_ptr) - 1):
        _draw_group_topics(d, doc_ptr, term_ids, grp_ptr, g, zg, n_topics, n_terms, alpha, beta,
                           rng_state, restricted, doc_counts)
    return zg


def log_p_w_z(doc_ptr, term_ids, z, n_topics, n_terms, alpha, beta):
    """Collapsed log p(W, Z) of token-level topics (Dirichlet-multinomial over documents and
    topics; Wallach et al. 2009), in total (not per token)."""
    lg = math.lgamma
    V = n_terms
    ll = 0.0
    for k in range(n_topics):
        col = [term_ids[i] for i in range(len(z)) if z[i] == k]
        ll += lg(V * beta) - lg(len(col) + V * beta)
        ll += sum(lg(c + beta) - lg(beta) for c in np.bincount(col, minlength=V) if c)
    A = float(np.sum(alpha))
    for d in range(len(doc_ptr) - 1):
        zd = z[doc_ptr[d]:doc_ptr[d + 1]]
        if len(zd) == 0:
            continue
        ll += lg(A) - lg(len(zd) + A)
        ll += sum(lg(c + alpha[k]) - lg(alpha[k]) for k, c in enumerate(np.bincount(zd, minlength=n_topics)))
    return ll
