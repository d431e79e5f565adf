"""Per-chain tables of tree-LDA's sparse sweep (:mod:`models.tree_lda.sparse_kernels`), laid out
for memory: a token's word picks random rows of every table it reads, so a sweep waits on
memory, not on arithmetic.

- The word table (``wint``, V x 4 int64, one 32-byte row per word) holds a word's path range and
  eq. 6's bound s'_w; the path table (``pint``, one 64-byte cache line per path) holds what a draw
  reads of a path: its root edge, second edge, length, S_p, the priors of its first two edges
  and beta_sum of the root edge's node. A token reads a line or two of them instead of one line
  of each of seven arrays (path_edges, path_len, path_prior, down bounds, beta, beta_sum,
  s_bound). Their float columns are read through a float64 view of the same rows.
- The root edges' lists (``pairs``, n_nodes x (1 + width) x 2 int32): a row holds the list's
  length and touched flag in its header, then topics and counts side by side, so the length, the
  flag and the list's head share a line. The lists live from sweep to sweep (built at a sweep's
  start, written back at its end), so a sweep cut into pieces (threads, :mod:`models.tree_lda.shards`)
  carries them from one piece to the next.
- :func:`prefetch_ahead` asks for the rows of the coming tokens' words in three steps (word
  record, path records, list heads and second edges' count rows), so that no step waits.

Every value is copied, or computed as the samplers compute it, so the tables change no draw.

A sweep hands them to its kernels as :class:`Tables`, beside its buffers :class:`DocCache` (the
document's list and cached sums) and :class:`Scratch` (what one draw writes and rereads).
"""
from typing import NamedTuple

import numpy as np
from ..common.jit import njit

from ..common.kernels.prefetch import prefetch, prefetch2
from .lists import topic_list

# Columns of the word table ``wint`` (n_terms, 4) int64 and of its float64 view ``wtab``.
W_LO, W_HI, W_BOUND = 0, 1, 2
# Columns of the path table ``pint`` (n_paths, 8) int64 (J0, E1, LEN) and of its float64 view
# ``ptab`` (the others): root edge, second edge (-1 for a one-edge path), edges, prod 1/beta_sum
# below the root edge, S_p, beta of the root edge, beta_sum of its node, beta of the second edge.
P_J0, P_E1, P_LEN, P_DOWN, P_S, P_B0, P_BS0, P_B1 = range(8)
# Tokens between the prefetch of a word's rows (path records, root-edge lists, second edges'
# counts) and its draw.
PREFETCH_AHEAD = 4


class Tables(NamedTuple):
    """A chain's tables as a sparse sweep reads them (:func:`sweep_tables`)."""

    wint: np.ndarray  # (n_terms, 4) int64: the word table, W_* columns
    wtab: np.ndarray  # its float64 view
    pint: np.ndarray  # (n_paths, 8) int64: the path table, P_* columns
    ptab: np.ndarray  # its float64 view
    etop: np.ndarray  # (n_nodes, width) int32: each root edge's list of topics (list_views)
    ecnt: np.ndarray  # (n_nodes, width) int32: their counts
    enz: np.ndarray  # (n_nodes,) int32: the lists' lengths
    touched: np.ndarray  # (n_nodes,) int32: 1 where this sweep changed the list


class DocCache(NamedTuple):
    """The current document's nonzero topics and the sums cached for it (``doc_sums``)."""

    dl: np.ndarray  # (3, K) int32: its topics, their counts, each topic's place (lists.py)
    coef: np.ndarray  # (K,) float64: (alpha_k + n_dk) / N_root,k
    acc: np.ndarray  # (2,) float64: sum_k alpha_k / N_root,k and sum_k n_dk / N_root,k


class Scratch(NamedTuple):
    """What one draw writes and reads back (``buckets``), sized for the word with most paths."""

    inv0: np.ndarray  # (2, K) float64: 1 / N_{j0, k} of a path's root-edge node (first_inv)
    tot: np.ndarray  # (3, max paths) float64: per path, its s, r and q totals
    qv: np.ndarray  # (max paths * K,) float64: the q cells, path after path
    qe: np.ndarray  # (2, max paths) int64: where each path's q cells end; the paths' q order


@njit(cache=True)
def fill_word_table(ptr, s_bound, wint):
    """The word table ``wint`` (V, 4): a word's first and end path, and s_bound's bits (column
    W_BOUND of the float64 view): what a draw reads of its word, on one line."""
    wtab = wint.view(np.float64)
    for w in range(len(ptr) - 1):
        wint[w, W_LO] = ptr[w]
        wint[w, W_HI] = ptr[w + 1]
        wtab[w, W_BOUND] = s_bound[w]
        wint[w, 3] = 0


@njit(cache=True)
def fill_path_table(path_edges, path_len, parent, beta, beta_sum, path_prior, pint):
    """The path table ``pint`` (n_paths, 8): the P_* columns (floats as their bits, read through
    the float64 view), what a draw reads of a path, one cache line per path instead of one line
    per array. Values are copied, or computed as the samplers always did (down: 1.0 divided by
    every beta_sum below the root edge), so draws are unchanged."""
    ptab = pint.view(np.float64)
    for p in range(len(path_len)):
        j0 = path_edges[p, 0]
        L = path_len[p]
        pint[p, P_J0] = j0
        pint[p, P_E1] = path_edges[p, 1] if L > 1 else -1
        pint[p, P_LEN] = L
        down = 1.0
        for l in range(1, L):
            down /= beta_sum[parent[path_edges[p, l]]]
        ptab[p, P_DOWN] = down
        ptab[p, P_S] = path_prior[p]
        ptab[p, P_B0] = beta[j0]
        ptab[p, P_BS0] = beta_sum[j0]
        ptab[p, P_B1] = beta[path_edges[p, 1]] if L > 1 else 0.0


@njit(cache=True, inline="always")
def prefetch_ahead(t, term_ids, wint, pint, enz, n_e, K):
    """Ask for what the draws of the coming tokens read first, in three steps so that no step
    waits for memory: the word record of token t + 3D, the path records of token t + 2D's word
    (read from its record, asked for D tokens ago), and for token t + D every path's root-edge
    list head (with its length and touched flag) and, below a synset node, the second edge's
    count row (read from the path records)."""
    D = PREFETCH_AHEAD
    n_tok = len(term_ids)
    if t + 3 * D < n_tok:
        prefetch2(wint, term_ids[t + 3 * D], 0)
    if t + 2 * D < n_tok:
        w = term_ids[t + 2 * D]
        for p in range(wint[w, W_LO], wint[w, W_HI]):
            prefetch2(pint, p, 0)
    if t + D < n_tok:
        w = term_ids[t + D]
        for p in range(wint[w, W_LO], wint[w, W_HI]):
            prefetch(enz, pint[p, P_J0])  # the list's header: its length, flag and head
            e1 = pint[p, P_E1]
            if e1 >= 0:
                k = 0
                while k < K:
                    prefetch2(n_e, e1, k)
                    k += 16


@njit(cache=True, inline="always")
def list_views(pairs):
    """The root edges' lists in ``pairs`` (n_nodes, 1 + width, 2) int32: row j's header
    ``pairs[j, 0]`` holds the list's length and its touched flag, then its topics and counts side
    by side, so that the length, the flag and the list's head share a cache line. Returns
    (topics, counts, lengths, touched), views of shape (n_nodes, width) and (n_nodes,)."""
    return pairs[:, 1:, 0], pairs[:, 1:, 1], pairs[:, 0, 0], pairs[:, 0, 1]


@njit(cache=True, inline="always")
def sweep_tables(wint, pint, pairs):
    """The :class:`Tables` of a chain's word table, path table and lists."""
    etop, ecnt, enz, touched = list_views(pairs)
    return Tables(wint, wint.view(np.float64), pint, pint.view(np.float64), etop, ecnt, enz,
                  touched)


@njit(cache=True)
def begin_lists(tables, tree, n_e, sort):
    """The nonzero-topic list of every edge out of ``tree.root`` (the first edges of the paths
    this sweep visits), none touched yet. Other rows are left alone: in a sharded sweep they
    belong to tasks running beside this one."""
    etop, ecnt, enz, touched = tables.etop, tables.ecnt, tables.enz, tables.touched
    parent, root = tree.parent, tree.root
    nopos = np.empty((1, 1), np.int32)
    for j in range(len(parent)):
        if parent[j] == root:
            touched[j] = 0
            enz[j] = topic_list(n_e, j, sort, etop, ecnt, nopos, j, False)


@njit(cache=True)
def end_lists(tables, tree, chain):
    """Counts of the touched edges out of ``tree.root`` from their lists (``tables``): ``n_e``'s
    row and, for an edge into an internal node, that node's ``n_i`` (the same counts) and
    ``inv`` rows of ``chain``."""
    etop, ecnt, enz, touched = tables.etop, tables.ecnt, tables.enz, tables.touched
    parent, root, beta_sum = tree.parent, tree.root, tree.beta_sum
    n_e, n_i, inv = chain.n_e, chain.n_i, chain.inv
    K = n_e.shape[1]
    for j in range(len(parent)):
        if parent[j] == root and touched[j]:
            n_e[j, :] = 0
            for a in range(enz[j]):
                n_e[j, etop[j, a]] = ecnt[j, a]
            if beta_sum[j] > 0:
                for k in range(K):
                    n_i[j, k] = n_e[j, k]
                    inv[j, k] = 1.0 / (beta_sum[j] + n_i[j, k])
