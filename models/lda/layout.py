"""The layout of LDA's sweep: packed list entries, term groups, list capacities and the
(shard, term group, document) order of the tokens; shared by the local trainer and its Ray
workers."""
import numpy as np

from . import kernels as K_
from ..common.gibbs import block_run_ptrs, key_runs


def count_shift(n_topics, max_doc_len):
    """Bits left for the count in a packed doc-list entry (topic << shift) | count."""
    shift = 31 - int(n_topics - 1).bit_length()
    if max_doc_len >= 1 << shift:
        raise ValueError(f"a document of {max_doc_len} tokens is too long for {n_topics} topics "
                         f"(at most {(1 << shift) - 1})")
    return shift


def word_list_packing(n_topics, max_cf):
    """(shift, dtype) of packed term-list entries (topic << shift) | count: int32 when every
    term frequency fits the bits left by the topic, else int64."""
    bits = int(n_topics - 1).bit_length()
    if max_cf < 1 << (31 - bits):
        return 31 - bits, np.int32
    return 63 - bits, np.int64


def term_groups(cf, n_groups):
    """S term groups of about equal token counts (greedy, most frequent term first, ties to
    the lowest group), so the blocks of a sub-step are about equally long."""
    group = np.zeros(len(cf), dtype=np.int64)
    if n_groups > 1:
        K_._greedy_groups(np.argsort(-cf, kind="stable"), cf, n_groups, group)
    return group


def cap_ptrs(lengths, n_topics):
    """Where every document's (or term's) topic list starts: room for min(length, K) entries."""
    return np.concatenate([[0], np.cumsum(np.minimum(lengths, n_topics))]).astype(np.int64)


def term_packing(n_topics, cf, max_doc_len):
    """The layout's parts that follow from the term frequencies and the longest document."""
    wshift, wdtype = word_list_packing(n_topics, cf.max(initial=0))
    return dict(wcap_ptr=cap_ptrs(cf, n_topics), wshift=wshift, wdtype=wdtype,
                cshift=count_shift(n_topics, max_doc_len))


def sweep_order(doc_ptr, term_ids, group, shard_doc, n_shards):
    """The sweep order (shard, term group, document, position) of the tokens of the documents
    ``doc_ptr`` cut into the shards ``shard_doc`` (all S of them, or a Ray worker's first
    ones, its documents counted from 0): the visits (runs of a document's tokens in a block)
    and the blocks' first visits ``block_visit_ptr`` (shards x S + 1)."""
    D, N, S = len(doc_ptr) - 1, len(term_ids), n_shards
    rows = len(shard_doc) - 1
    tok_doc = np.repeat(np.arange(D, dtype=np.int32), np.diff(doc_ptr))
    tok_shard = np.searchsorted(shard_doc, tok_doc, side="right") - 1
    block = tok_shard.astype(np.int64) * S + group[term_ids]
    ord_pos = np.empty(N, dtype=np.int64)
    K_._counting_sort(block, rows * S, ord_pos)  # stable: doc order within every block
    visit_ptr, visit_key = key_runs(block[ord_pos] * max(D, 1) + tok_doc[ord_pos])
    return dict(
        ord_pos=ord_pos.astype(np.int32 if N < 2**31 else np.int64), ord_doc=tok_doc[ord_pos],
        ord_word=term_ids[ord_pos],
        shard_tok_ptr=np.searchsorted(tok_shard[ord_pos], np.arange(rows + 1)).astype(np.int64),
        visit_ptr=visit_ptr, visit_doc=(visit_key % max(D, 1)).astype(np.int32),
        block_visit_ptr=block_run_ptrs(visit_key // max(D, 1), S, rows))
