"""The layout of PAM's sweep: the (shard, term group, term, position) order of the tokens and
its runs; shared by the local trainer and its Ray workers."""
import numpy as np

from ..common.gibbs import block_run_ptrs, key_runs
from ..lda import kernels as LK


def sweep_order(doc_ptr, term_ids, group, shard_doc, n_shards):
    """The sweep order of the tokens of the documents ``doc_ptr`` cut into the shards
    ``shard_doc`` (all S of them, or a Ray worker's first ones, its documents counted from 0):
    shard, term group, term, then position, by two stable counting sorts in O(N + V). Returns
    ord_pos, ord_doc, the runs of a term's tokens (run_ptr, run_word), the blocks' first runs
    ``block_run_ptr`` (shards x S + 1) and the shards' first tokens ``shard_tok_ptr``."""
    D, N, S, V = len(doc_ptr) - 1, len(term_ids), n_shards, len(group)
    rows = len(shard_doc) - 1
    tok_doc = np.repeat(np.arange(D, dtype=np.int32), np.diff(doc_ptr))
    tok_shard = np.searchsorted(shard_doc, tok_doc, side="right") - 1
    block = tok_shard.astype(np.int64) * S + group[term_ids]
    by_term = np.empty(N, dtype=np.int64)
    LK._counting_sort(term_ids, V, by_term)
    ord_pos = np.empty(N, dtype=np.int64)
    LK._counting_sort(block[by_term], rows * S, ord_pos)
    ord_pos = by_term[ord_pos]
    run_ptr, run_key = key_runs((block * V + term_ids)[ord_pos])
    block_run_ptr = block_run_ptrs(run_key // V, S, rows)
    return dict(ord_pos=ord_pos.astype(np.int32 if N < 2**31 else np.int64), ord_doc=tok_doc[ord_pos],
                run_ptr=run_ptr, run_word=(run_key % V).astype(np.int32), block_run_ptr=block_run_ptr,
                shard_tok_ptr=np.concatenate([run_ptr[block_run_ptr[:, 0]], [N]]).astype(np.int64))
