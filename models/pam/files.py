"""What a PAM model file and checkpoint must hold: the tables of :mod:`models.common.validate`
checks every load runs before a kernel reads the file."""
import numpy as np

from ..common import file_specs as F
from ..common import validate as V
from ..common import validate_tables as T


# the kept samples' counts: uint16 where every count fits (files of int32 counts load as well)
_PAM_COUNT = (np.uint16, np.int32)

SPEC = V.Spec(
    model=(
        *F.doc_len(),
        V.array("dp_ptr", ("samples", "documents+1"), np.int64),
        V.array("dp_key_samples", ("pair_entries",), np.int32),
        V.array("dp_count_samples", ("pair_entries",), _PAM_COUNT),
        *T.table("dp_ptr", "dp_key_samples", "dp_count_samples", "pairs", sums=True),
        T.totals("dp_count_samples", "dp_ptr", "doc_len"),
        *F.csr("tw", "terms", "sub", "sub-topics", count_dtype=_PAM_COUNT, sums=True),
        V.array("n_j_samples", ("samples", "sub-topics"), np.int64),
        T.totals("tw_count", "tw_ptr", "n_j_samples", by="tw_sub", width="sub-topics"),
        # a pair key is super * n_sub + sub: the documents' counts per sub-topic are n_j too
        T.totals("dp_count_samples", "dp_ptr", "n_j_samples", by="dp_key_samples",
                 width="sub-topics", fold="sub-topics"),
        V.array("alpha_samples", ("samples", "super-topics", "sub-topics"), np.float64),
        V.prior("alpha_samples"),
    ),
    checkpoint=F.state_checks("z", ("tokens",), np.int32, F.assignments("pairs"), "alpha",
                              ("super-topics", "sub-topics"), ("shards",)),
    dims=lambda m, h, c: {"super-topics": m.n_super, "sub-topics": m.n_sub, "pairs": m.n_super * m.n_sub},
    priors=(("alpha_root", True), ("alpha_sub", False), ("beta", False)))
