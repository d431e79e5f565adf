"""Adam's state partitioned over data-parallel workers (stage 1 of ZeRO, Rajbhandari et al.
2020), for :mod:`models.avipam.distributed`.

The parameters that take gradients, flattened one after another in ``net.parameters()`` order,
are cut into W contiguous ranges of about equal length; worker r keeps Adam's two moments for
range r alone. A step: the gradients are summed over the workers (as without the partition),
each worker applies Adam to its range, and the ranges' new values go to every worker
(an all-gather on NCCL; over gloo, whose reduce-scatter and all-gather cost more than its
all-reduce, one broadcast a range): half an all-reduce's bytes more a step, for Adam's state and
its update shrunk to 1/W of the parameters on every worker. Adam's update is elementwise and run
by torch's own function with the optimizer's settings, so a range's values are those one
process's Adam gives them: the model is the replicated run's.

Checkpoints keep one process's layout (``opt.{i}.exp_avg`` of parameter i's shape): the ranges
are gathered when one is written and cut again when one is read, so a checkpoint moves between
one process and any number of workers.
"""
import numpy as np
import torch
import torch.distributed as dist
from torch.optim.adam import adam

MOMENTS = ("exp_avg", "exp_avg_sq")
# torch 2.13 renamed the collective (the old name warns); older versions have only that one
_all_gather = getattr(dist, "all_gather_single", dist.all_gather_into_tensor)


# Range boundaries fall on multiples of ALIGN values from a parameter's start (or on its end):
# torch's fused Adam rounds a tensor's last few values (past its vector width) differently from
# the rest, so a range must end where the whole tensor's vectors do.
ALIGN = 1024


class PartitionedAdam:
    """The moments of range ``rank`` of ``world`` of ``opt``'s parameters (a
    ``torch.optim.Adam`` of one group over ``net.parameters()``, whose settings every step uses);
    ``opt``'s own state, when a checkpoint filled it, is taken over and dropped. ``tally(purpose,
    call, n_bytes)`` runs a collective (and counts it); ``sum_grads(params)``, if given, sums
    the gradients of ``params`` over the workers in place (else one all-reduce of them all)."""

    def __init__(self, opt, rank, world, tally, sum_grads=None):
        (group,) = opt.param_groups
        self.group = group
        self.params = list(group["params"])
        self.index = [i for i, p in enumerate(self.params) if p.requires_grad]
        sizes = [self.params[i].numel() for i in self.index]
        starts = np.concatenate([[0], np.cumsum(sizes)])
        self.total = int(starts[-1])
        cuts = [0] + [_snap(r * self.total // world, starts) for r in range(1, world)] + [self.total]
        self.cuts = cuts = np.maximum.accumulate(cuts)
        self.chunk = max(1, int(np.diff(cuts).max()))
        self.rank, self.world, self.tally, self.sum_grads = rank, world, tally, sum_grads
        # every range's pieces: (parameter index, start and end in its flat values, place in the
        # padded flat layout of W ranges of ``chunk`` values)
        self.layout = []
        for r in range(world):
            for j, i in enumerate(self.index):
                a, b = max(cuts[r], starts[j]), min(cuts[r + 1], starts[j + 1])
                if a < b:
                    self.layout.append((r, i, int(a - starts[j]), int(b - starts[j]), int(r * self.chunk + a - cuts[r])))
        self.pieces = [(i, a, b, at - rank * self.chunk) for r, i, a, b, at in self.layout if r == rank]
        dev = self.params[self.index[0]].device
        self.moments = {k: torch.zeros(self.chunk, device=dev) for k in MOMENTS}
        self.steps = [torch.zeros((), device=dev) for _ in self.pieces]
        self.n_steps = 0
        if opt.state:
            self._take(opt)

    def _take(self, opt):
        """The moments and step of this range from ``opt``'s full state (a resumed checkpoint's)."""
        self.n_steps = int(float(next(iter(opt.state.values()))["step"]))  # shape () or (1,)
        for (i, a, b, at), step in zip(self.pieces, self.steps):
            st = opt.state[self.params[i]]
            for k in MOMENTS:
                self.moments[k][at:at + b - a] = st[k].reshape(-1)[a:b]
            step.fill_(float(st["step"]))
        opt.state.clear()

    def step(self):
        """Sum the workers' gradients (an all-reduce), apply Adam to this worker's range and send
        its new values to the others."""
        trained = [self.params[i] for i in self.index]
        if any(p.grad is None for p in trained):
            raise RuntimeError("a parameter took no gradient in this step: every worker's Adam range "
                               "needs every one")
        if self.sum_grads is not None:
            self.sum_grads(trained)
        grads = torch.cat([p.grad.reshape(-1) for p in trained])
        if self.sum_grads is None:
            self.tally("gradients", lambda: dist.all_reduce(grads), grads.numel() * grads.element_size())
        for p in trained:
            p.grad = None
        g, lo = self.group, self.cuts[self.rank]
        views = [(self.params[i].data.view(-1)[a:b], at, b - a) for i, a, b, at in self.pieces]
        with torch.no_grad():
            if views:
                adam([v for v, _, _ in views], [grads[lo + at:lo + at + n] for _, at, n in views],
                     *([self.moments[k][at:at + n] for _, at, n in views] for k in MOMENTS), [], self.steps,
                     amsgrad=g["amsgrad"], beta1=g["betas"][0], beta2=g["betas"][1], lr=g["lr"],
                     weight_decay=g["weight_decay"], eps=g["eps"], maximize=g["maximize"], foreach=g["foreach"],
                     capturable=g["capturable"], differentiable=g["differentiable"], fused=g["fused"],
                     decoupled_weight_decay=g["decoupled_weight_decay"])
            del grads
            if self.world > 1:  # (one worker's views are the parameters)
                self._share(views)
        self.n_steps += 1

    def _share(self, views):
        """Every worker's range's new values into every worker's parameters."""
        out = torch.empty(self.world * self.chunk, device=self.moments["exp_avg"].device)
        mine = out[self.rank * self.chunk:][:self.chunk]
        for v, at, n in views:
            mine[at:at + n] = v
        self._exchange(out)
        for r, i, a, b, at in self.layout:
            if r != self.rank:  # this worker's range is in its parameters already
                self.params[i].data.view(-1)[a:b] = out[at:at + b - a]

    def _exchange(self, out):
        """Every range of ``out`` (W of ``chunk`` values) from the worker that holds it: one
        broadcast a range over gloo, whose all-gather costs several times as much; an all-gather
        elsewhere (NCCL)."""
        n_bytes = out.numel() * out.element_size()
        if dist.get_backend() != "gloo":
            mine = out[self.rank * self.chunk:][:self.chunk].clone()
            self.tally("parameters", lambda: _all_gather(out, mine), n_bytes)
            return
        for r in range(self.world):
            part = out[r * self.chunk:][:self.chunk]
            self.tally("parameters", lambda: dist.broadcast(part, src=r), n_bytes // self.world)

    def state_bytes(self):
        return sum(m.numel() * m.element_size() for m in self.moments.values())

    def gathered(self):
        """Every worker's ranges, on rank 0 as one process's ``opt.{i}.{k}`` checkpoint arrays
        (other ranks: None). Every worker calls it."""
        full = {}
        for k in MOMENTS:
            parts = [torch.empty_like(self.moments[k]) for _ in range(self.world)] if self.rank == 0 else None
            dist.gather(self.moments[k], parts, dst=0)
            full[k] = torch.cat(parts).cpu() if self.rank == 0 else None
        if self.rank != 0:
            return None
        arrays = {f"opt.{i}.{k}": np.zeros(tuple(self.params[i].shape), np.float32)
                  for i in self.index for k in MOMENTS}
        for _, i, a, b, at in self.layout:
            for k in MOMENTS:
                arrays[f"opt.{i}.{k}"].reshape(-1)[a:b] = full[k][at:at + b - a].numpy()
        for i in self.index:
            arrays[f"opt.{i}.step"] = np.array(self.n_steps, dtype=np.float32)
        return arrays


def _snap(cut, starts):
    """``cut`` moved to the nearest multiple of ALIGN from the start of the parameter it falls in,
    or to that parameter's end."""
    j = int(np.searchsorted(starts, cut, side="right")) - 1
    lo, hi = int(starts[j]), int(starts[min(j + 1, len(starts) - 1)])
    return min(hi, lo + round((cut - lo) / ALIGN) * ALIGN)
