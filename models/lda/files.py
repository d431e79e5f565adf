"""What an LDA model file and checkpoint must hold (gLDA's model files too): the tables of
:mod:`models.common.validate` checks every load runs before a kernel reads the file."""
import numpy as np

from ..common import file_specs as F
from ..common import validate as V
from ..common import validate_tables as T


MODEL = (
    *F.doc_len(),
    *F.csr("kd", "topics", "doc", "documents", dtype=np.int32, sums=True),
    *F.csr("tw", "terms", "topic", "topics", sums=True),
    V.array("n_k_samples", ("samples", "topics"), np.int64),
    T.totals("kd_count", "kd_ptr", "n_k_samples"),
    T.totals("tw_count", "tw_ptr", "n_k_samples", by="tw_topic", width="topics"),
    T.totals("kd_count", "kd_ptr", "doc_len", by="kd_doc", width="documents"),
    V.array("alpha_samples", ("samples", "topics"), np.float64), V.prior("alpha_samples"),
)

SPEC = V.Spec(
    model=MODEL,
    checkpoint=F.state_checks("z", ("tokens",), (np.int32, np.uint16),
                              F.assignments("topics"), "alpha", ("topics",), ("shards",)),
    dims=F.no_dims, priors=(("alpha", True), ("beta", False)))
