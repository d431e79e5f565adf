"""How ``topicir bench scale`` extrapolates the figures measured on two fractions of the
collection to the target collection (see :mod:`retrieval.bench.scale`): training time and
memory as a part that grows with the tokens and one that grows with the vocabulary, the
sweeps' speed-up as chains settle, and the batch with a model as exact QL plus what the model
adds.
"""
from __future__ import annotations

import math


def _median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def fit_two(x1: float, y1: float, x2: float, y2: float, v1: float = 0.0, v2: float = 0.0) -> tuple[float, float]:
    """Non-negative (a, b) with ``y = a * x + b * v`` through two measurements, or with
    ``v = 1`` (``v1 = v2 = 1``) ``y = a * x + b``: a size-proportional part and one that is not
    (a fixed cost, or one that grows with the vocabulary). Where the exact solution has a
    negative part (measurement noise, or growth slower than either size), that part is dropped
    and the other fitted to the larger run alone."""
    det = x1 * v2 - x2 * v1
    a, b = ((y1 * v2 - y2 * v1) / det, (x1 * y2 - x2 * y1) / det) if det else (-1.0, -1.0)
    if a >= 0 and b >= 0:
        return a, b
    if a < 0 and v2 > 0:
        return 0.0, max(y2, 0.0) / v2
    return max(y2, 0.0) / x2, 0.0


def projection(r: dict, small: dict | None, target: dict, early: dict | None = None) -> dict:
    """Figures of one kind for the ``target`` collection (tokens, terms, docs) from its runs on
    the fraction (``r``) and on the smaller fraction (``small``; None: linear in tokens from
    ``r`` alone; ``early``: the smaller fraction at the fraction's sweeps, for the batch, see
    :func:`batch_added`). See the module docstring. ``own_sweeps``: the training was projected
    from the fraction's own sweeps (it trained the whole schedule, :func:`own_curve`)."""
    d = r["defaults"]
    chains = d.get("n_chains", 1)
    total = d.get("epochs") or d.get("n_iter")

    n_big = len(r["steps"])

    def vocab_work(n_docs, n_terms):
        # what a sweep grows with besides the tokens: the vocabulary; an epoch of mini-batches
        # updates the vocabulary-sized parameters (the encoders' first layers) at every step
        if d.get("epochs") and d.get("batch_size"):
            return math.ceil(n_docs / d["batch_size"]) * n_terms
        return n_terms

    def parts(run):
        steps = run["steps"][:n_big]  # the small run may go on: its first sweeps pair with r's
        rest = steps[1:] if len(steps) > 1 else steps
        # median: the last sweep also computes the likelihood
        return dict(setup=run["inputs_s"] + steps[0], step=_median(rest),
                    finish=run["finish_s"], mem=max(run["peak_gib"] - run["base_gib"], 0.0))

    big = parts(r)
    timed = "vocab_step_s" in r  # an epoch's vocabulary-sized parts timed apart
    if timed:  # the first epoch: an epoch plus what it does once, fitted below
        big["setup"] -= big["step"]
    if small is None:
        ratio = target["tokens"] / r["n_tokens"]
        proj = {k: v * ratio for k, v in big.items()}
    else:
        lo = parts(small)
        if timed:
            lo["setup"] -= lo["step"]
        proj = {}
        for key in big:  # tokens and vocabulary
            v = vocab_work if key in ("setup", "step") else (lambda n_docs, n_terms: n_terms)
            a, b = fit_two(small["n_tokens"], lo[key], r["n_tokens"], big[key],
                           v(small["n_docs"], small["n_terms"]), v(r["n_docs"], r["n_terms"]))
            proj[key] = a * target["tokens"] + b * v(target["docs"], target["terms"])
        proj["mem"] = max(proj["mem"], memory_by_parts(r, small, target))
    if timed:
        proj["step"] = epoch_by_parts(r, big["step"], target)
        proj["setup"] += proj["step"]
    own = n_big >= total  # the fraction trained the whole schedule: its own sweeps, scaled
    if own:
        curve = own_curve(r["steps"])
        late = _median(curve[-5:])
    else:
        curve = sweep_curve(small["steps"], n_big) if small is not None else [1.0]
        late = curve[-1]
    # sweeps 2.. of the default run: the early sweeps' time, along the curve, its last point
    # held for the sweeps after it
    sweeps_s = sum(proj["step"] * curve[min(i, len(curve) - 1)] for i in range(total - 1))
    train_s = proj["setup"] + sweeps_s + proj["finish"]
    batch_parts = dict(ql_s=target["ql_batch_s"], **batch_added_parts(r, target["docs"], small, early,
                                                                     target.get("scoring_s")))
    return dict(setup_s=proj["setup"], per_chain_s=proj["step"] / chains, late_chain_s=proj["step"] * late / chains,
                chains=chains, sweeps=total, train_min=train_s / 60, peak_gib=r["base_gib"] + proj["mem"],
                batch_s=sum(batch_parts.values()), sweeps_s=sweeps_s, finish_s=proj["finish"],
                batch_parts=batch_parts, own_sweeps=own)


PARTS = ("tables_s", "extras_s", "scoring_s")  # the batch's parts timed apart (bench.scale)


def batch_added(r: dict, docs: float, small: dict | None = None, early: dict | None = None,
                scoring_s: float | None = None) -> float:
    """Seconds a model adds to the exact QL batch on ``docs`` documents: the sum of
    :func:`batch_added_parts`."""
    return sum(batch_added_parts(r, docs, small, early, scoring_s).values())


def batch_added_parts(r: dict, docs: float, small: dict | None = None, early: dict | None = None,
                      scoring_s: float | None = None) -> dict:
    """Seconds a model adds to the exact QL batch on ``docs`` documents, by part: those that grow
    with the documents (``PARTS``: P_TM tables, finding a kind's extra query parts, the mixture's
    scoring; timed apart on the fraction) and the rest of what it added there (``rest_s``, per
    query) as it was. With a smaller run's parts too, each part is a cost per document plus a
    fixed one (per query: the scoring's arrays, the tables' per-term sums) fitted through both
    runs (linear through the fraction where the smaller run's figure says otherwise: noise;
    finding the extra parts compared per query that has one, ``extra_queries``); else each is
    linear in documents. Runs without those parts: all it added (``rest_s``),
    linear in documents.

    ``early``: the small collection trained for as many sweeps as the fraction: the fit then
    pairs runs at the same sweep (a sampler's rows change as its chains settle, and a small
    collection settles sooner than the fraction), so the figure is that of a model at the
    fraction's sweeps.

    ``scoring_s``: the mixture's scoring of the query terms timed on ``docs`` documents (the same
    work for every model) replaces the fitted scoring part (a kind's extra parts, TCM's
    collocations, are scored in their own part)."""
    added = max(r["batch_s"] - r["ql_batch_s"], 0.0)
    if "scoring_s" not in r:
        return dict(rest_s=added * docs / r["n_docs"])
    measured = sum(r[p] for p in PARTS)
    pair = early if early is not None else small
    out = {}
    for part in PARTS:
        a, b = r[part] / r["n_docs"], 0.0
        if pair is not None and part in pair and pair["n_docs"] < r["n_docs"]:
            other = pair[part]
            if part == "extras_s" and pair.get("extra_queries") and r.get("extra_queries"):
                # as many queries with a part in both runs (a smaller model finds fewer)
                other *= r["extra_queries"] / pair["extra_queries"]
            slope = (r[part] - other) / (r["n_docs"] - pair["n_docs"])
            if 0.0 <= slope <= a:  # else noise: linear through the fraction, the larger figure
                a, b = slope, r[part] - slope * r["n_docs"]
        out[part] = a * docs + b
    if scoring_s is not None:
        out["scoring_s"] = scoring_s
    out["rest_s"] = max(added - measured, 0.0)
    return out


def memory_by_parts(r: dict, small: dict, target: dict) -> float:
    """GiB above the baseline from the model's own arrays, whose size follows the tokens and the
    vocabulary exactly (fitted on both runs), plus the rest of the peak (buffers, threads'
    tables, the allocator's slack) as a fixed part and one that grows with the vocabulary. Where
    the peak is mostly that rest on the fractions, this still sees the arrays that grow with
    the tokens."""
    a, b = fit_two(small["n_tokens"], small["retained_gib"], r["n_tokens"], r["retained_gib"],
                   small["n_terms"], r["n_terms"])

    def rest(run):
        return max(run["peak_gib"] - run["base_gib"] - run["retained_gib"], 0.0)

    c, f = fit_two(small["n_terms"], rest(small), r["n_terms"], rest(r), 1.0, 1.0)
    return a * target["tokens"] + b * target["terms"] + c * target["terms"] + f


def sweep_curve(steps: list[float], n_early: int) -> list[float]:
    """Seconds of sweeps 2, 3, ... of a run relative to its sweeps 2..``n_early`` (their
    median): a running median over five sweeps, the last point the median of the last five.
    Samplers that visit fewer topics per token as the chain settles (PAM's pairs, sparse
    buckets) get faster sweep after sweep; a short run would miss that. A sweep does not get
    slower as its chain settles, so a ratio above 1 (timing noise on a small run's sweeps of a
    tenth of a second) counts as 1."""
    rest = steps[1:]
    if not rest:
        return [1.0]
    early = _median(rest[:max(1, n_early - 1)])
    out = [min(_median(rest[max(0, i - 2):i + 3]) / early, 1.0) for i in range(len(rest))]
    out[-1] = min(_median(rest[-5:]) / early, 1.0)
    return out


def epoch_by_parts(r: dict, epoch_s: float, target: dict) -> float:
    """Seconds of an epoch of mini-batches on the ``target`` collection from one run whose
    vocabulary-sized parts were timed apart (``vocab_step_s``: Adam's step and the first layers'
    dense gradients, per step; ``mstep_s``: the closed-form topics, once an epoch): those grow
    with the steps times the vocabulary, the M-step with the vocabulary, and the rest of the
    epoch (``epoch_s`` less those) with the tokens (the steps' batches: documents of the same
    lengths)."""
    batch = r["defaults"]["batch_size"]
    steps, steps_t = math.ceil(r["n_docs"] / batch), math.ceil(target["docs"] / batch)
    vocab = r["vocab_step_s"] * steps + r["mstep_s"]
    rest = max(epoch_s - vocab, 0.0)
    grow_v = target["terms"] / r["n_terms"]
    return rest * target["tokens"] / r["n_tokens"] + (r["vocab_step_s"] * steps_t + r["mstep_s"]) * grow_v


def own_curve(steps: list[float]) -> list[float]:
    """Seconds of sweeps 2, 3, ... of a run that trained every sweep of the schedule, relative
    to their median (the sweep time :func:`projection` fits): the sweeps are measured, only their
    size is extrapolated."""
    rest = steps[1:] or steps
    med = _median(rest)
    return [x / med for x in rest] if med > 0 else [1.0] * len(rest)


def target_size(full: dict, frac: dict, grow: float, max_terms: int) -> dict:
    """Tokens, terms and documents of the collection the figures are for: the whole index,
    grown linearly in documents to AP's size, its vocabulary by Heaps' law through the fraction
    and the whole index (at most the generator's vocabulary)."""
    tokens = full["n_tokens"] * grow
    terms = float(full["n_terms"])
    if grow > 1 and full["n_tokens"] > frac["n_tokens"] and full["n_terms"] > frac["n_terms"]:
        beta = math.log(full["n_terms"] / frac["n_terms"]) / math.log(full["n_tokens"] / frac["n_tokens"])
        terms = min(full["n_terms"] * grow ** beta, float(max_terms))
    out = dict(tokens=tokens, terms=terms, docs=full["n_docs"] * grow, ql_batch_s=full["batch_s"] * grow)
    if "scoring_s" in full:  # the mixture's scoring, timed on the whole collection
        out["scoring_s"] = full["scoring_s"] * grow
    return out
