"""The last table of ``topicir bench scale``: where each kind's projected training and batch go
(see :mod:`retrieval.bench.scale`)."""
from __future__ import annotations

from ..core.tables import Table, fixed


def profile_table(kinds, proj) -> Table:
    """Where each kind's projected training and batch go (the parts of the first table's figures)."""
    rows = []
    for k in kinds:
        p, b = proj[k], proj[k]["batch_parts"]
        rows.append({"kind": k, "training min": fixed(p["train_min"], 1),
                     "setup min": fixed(p["setup_s"] / 60, 1), "sweeps (epochs) min": fixed(p["sweeps_s"] / 60, 1),
                     "finishing min": fixed(p["finish_s"] / 60, 1), "batch s": fixed(p["batch_s"], 2),
                     "exact QL s": fixed(b["ql_s"], 2), "P_TM tables s": fixed(b.get("tables_s", 0.0), 2),
                     "extra parts s": fixed(b.get("extras_s", 0.0), 2),
                     "mixture scoring s": fixed(b.get("scoring_s", 0.0), 2), "rest (per query) s": fixed(b["rest_s"], 2)})
    notes = ["Projected to the target collection as in the first table, whose training and batch figures "
             "are these parts' sums: training = setup (training inputs, initialisation, first sweep) + the "
             "remaining sweeps (epochs) of all chains + finishing; batch = the exact QL batch + what the model "
             "adds (bench.scale_fit.batch_added_parts). What a sweep spends its time on is measured by each "
             "kind's own benchmark (docs/benchmarks.md)."]
    return Table("Where the time goes (projected, per kind)", rows, notes=notes)
