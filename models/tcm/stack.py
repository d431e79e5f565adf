"""The kept samples' restaurants of the Topical Collocation Model stacked over one vocabulary of
collocation types: what a model file holds of them, built the same way by the local trainer
(:meth:`models.tcm.model.TCM._finalize`) and from the Ray workers' parts
(:mod:`models.tcm.ray_state`)."""
import numpy as np


def stack_restaurants(samples, term_ids, max_len):
    """Every kept sample's restaurant entries re-indexed by one sorted type vocabulary.

    Parameters
    ----------
    samples : list of dict
        Kept samples in model-file order (cs = c * n_samples + s), each with ``ty_pos`` and
        ``ty_len`` (a type's first occurrence: token position and length), ``en_ptr``,
        ``en_topic`` and ``en_count`` (the type's entries, compacted).
    term_ids : ndarray of shape (n_tokens,), int
        The corpus the positions point into (read only at the types' occurrences).
    max_len : int

    Returns
    -------
    dict of ndarray
        ``type_ptr`` (int64) and ``type_terms`` (int32): type t is
        ``type_terms[type_ptr[t]:type_ptr[t + 1]]``, sorted by length, then term ids;
        ``ct_ptr`` (int64), ``ct_type`` (int32), ``ct_topic`` and ``ct_count``: the entries of
        sample cs are ``ct_ptr[cs]:ct_ptr[cs + 1]``, sorted by type then topic.
    """
    n_tokens = len(term_ids)
    # one type vocabulary: occurrences (pos, len) -> padded term rows -> sorted unique rows
    pos = np.concatenate([s["ty_pos"] for s in samples])
    ln = np.concatenate([s["ty_len"] for s in samples]).astype(np.int64)
    key, inv_occ = np.unique(pos * (max_len + 1) + ln, return_inverse=True)
    upos, ulen = key // (max_len + 1), key % (max_len + 1)
    L = max_len
    cols = np.arange(L)
    idx = np.minimum(upos[:, None] + cols[None, :], n_tokens - 1)
    rows = np.where(cols[None, :] < ulen[:, None], term_ids[idx], -1).astype(np.int32)
    order = np.lexsort([rows[:, j] for j in range(L - 1, -1, -1)] + [ulen])
    rows_s, len_s = rows[order], ulen[order]
    new = np.ones(len(order), dtype=bool)
    new[1:] = (np.diff(len_s) != 0) | (rows_s[1:] != rows_s[:-1]).any(axis=1)
    type_of_sorted = np.cumsum(new) - 1
    type_of_occ = np.empty(len(order), dtype=np.int64)
    type_of_occ[order] = type_of_sorted
    first = np.flatnonzero(new)
    lens = len_s[first]
    out = dict(type_ptr=np.concatenate([[0], np.cumsum(lens)]).astype(np.int64),
               type_terms=rows_s[first][cols[None, :] < lens[:, None]].astype(np.int32))
    union = type_of_occ[inv_occ]
    # restaurants of every sample, re-indexed by union type and sorted by (type, topic)
    ct_type, ct_topic, ct_count, ct_ptr = [], [], [], [0]
    off = 0
    for s in samples:
        n = len(s["ty_pos"])
        u = union[off:off + n]
        off += n
        cnt = np.diff(s["en_ptr"])
        o = np.argsort(u, kind="stable")
        starts = s["en_ptr"][:-1][o]
        lens_o = cnt[o]
        gather = np.repeat(starts - np.concatenate([[0], np.cumsum(lens_o)[:-1]]), lens_o) + \
            np.arange(lens_o.sum())
        ct_type.append(np.repeat(u[o], lens_o).astype(np.int32))
        ct_topic.append(s["en_topic"][gather])
        ct_count.append(s["en_count"][gather])
        ct_ptr.append(ct_ptr[-1] + int(lens_o.sum()))
    out.update(ct_ptr=np.array(ct_ptr, dtype=np.int64), ct_type=np.concatenate(ct_type),
               ct_topic=np.concatenate(ct_topic), ct_count=np.concatenate(ct_count))
    return out
