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
    # one type vocabulary: occurrences (pos, len) -> their terms, length by length -> sorted
    # unique rows (a length's rows only as wide as it: no padding to max_len)
    pos = np.concatenate([s["ty_pos"] for s in samples])
    ln = np.concatenate([s["ty_len"] for s in samples]).astype(np.int64)
    key, inv_occ = np.unique(pos * (max_len + 1) + ln, return_inverse=True)
    upos, ulen = key // (max_len + 1), key % (max_len + 1)
    del pos, ln, key
    type_of_occ = np.empty(len(upos), dtype=np.int64)
    lens, terms, n_types = [], [], 0
    for m in range(1, max_len + 1):
        sel = np.flatnonzero(ulen == m)
        if not len(sel):
            continue
        rows = np.asarray(term_ids)[upos[sel][:, None] + np.arange(m)].astype(np.int32)
        order = np.lexsort(rows.T[::-1])  # by the first term, then the second, ...
        rows = rows[order]
        new = np.ones(len(order), dtype=bool)
        new[1:] = (rows[1:] != rows[:-1]).any(axis=1)
        type_of_occ[sel[order]] = n_types + np.cumsum(new) - 1
        terms.append(rows[new].ravel())
        lens.append(np.full(int(new.sum()), m, np.int64))
        n_types += int(new.sum())
    lens = np.concatenate(lens) if lens else np.zeros(0, np.int64)
    out = dict(type_ptr=np.concatenate([[0], np.cumsum(lens)]).astype(np.int64),
               type_terms=np.concatenate(terms).astype(np.int32) if terms else np.zeros(0, np.int32))
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
