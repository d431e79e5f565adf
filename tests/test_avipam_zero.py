"""Adam's state partitioned over data-parallel workers (models/avipam/zero.py): two gloo
processes, each keeping the moments of half the parameters, take exactly the steps of one
torch.optim.Adam on the summed gradients, and their gathered moments are its state."""
import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from models.avipam.zero import PartitionedAdam

STEPS = 4


def _net():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(300, 10), nn.Tanh(), nn.Linear(10, 3))  # ranges cut the first weights
    net.append(nn.Linear(3, 1, bias=False)).requires_grad_(True)
    net[2].bias.requires_grad_(False)  # a parameter Adam never sees: left out of the ranges
    return net


def _grads(net, rank, step):
    """Worker ``rank``'s gradients at ``step``: of its own seeded batch."""
    g = torch.Generator().manual_seed(100 * step + rank)
    x = torch.randn(6, 300, generator=g)
    net.zero_grad()
    net(x).pow(2).sum().backward()


def _opt(net):
    return torch.optim.Adam(net.parameters(), lr=0.01, betas=(0.99, 0.999), fused=True)


def _worker(rank, world, rendezvous, out):
    # a file, not a TCP port: a port found free may be taken by another test before gloo binds it
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world)
    torch.set_num_threads(1)
    try:
        net = _net()
        counted = []
        adam = PartitionedAdam(_opt(net), rank, world, lambda what, call, n: (call(), counted.append((what, n))))
        for step in range(STEPS):
            _grads(net, rank, step)
            adam.step()
        moments = adam.gathered()
        if rank == 0:
            torch.save(dict(params=[p.detach().clone() for p in net.parameters()], moments=moments,
                            counted=counted, state_bytes=adam.state_bytes()), out)
        # gloo aborts a process ("terminate called without an active exception") that tears
        # its group down while a peer is still in a collective: leave together
        dist.barrier()
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("world", [2, 3])
def test_workers_take_one_adams_steps_on_the_summed_gradients(tmp_path, world):
    out = tmp_path / "rank0.pt"
    mp.spawn(_worker, args=(world, str(tmp_path / "rendezvous"), str(out)), nprocs=world, join=True)
    got = torch.load(out, weights_only=False)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the workers: a matrix product's sums split by thread count
    try:
        net = _reference(world)
    finally:
        torch.set_num_threads(threads)
    # two workers' sums are exact in any order; three's follow the all-reduce's order
    tol = dict(rtol=0, atol=0) if world == 2 else dict(rtol=1e-6, atol=1e-7)
    for mine, want in zip(got["params"], net.parameters()):
        torch.testing.assert_close(mine, want.detach(), **tol)
    opt = net.opt
    want_state = {f"opt.{i}.{k}": v.numpy() for i, st in opt.state_dict()["state"].items() for k, v in st.items()}
    assert got["moments"].keys() == want_state.keys()
    for key, value in want_state.items():
        np.testing.assert_allclose(got["moments"][key], value, err_msg=key, **tol)
        assert got["moments"][key].dtype == value.dtype and got["moments"][key].shape == value.shape
    # ranges cut at multiples of ALIGN within the first weights: 3,043 values, [0, 1024) and
    # [1024, 3043), or [0, 1024), [1024, 2048) and [2048, 3043)
    chunk = {2: 3043 - 1024, 3: 1024}[world]
    # an all-reduce of every gradient, then (gloo) one broadcast of every padded range, a step
    assert got["counted"] == ([("gradients", 4 * 3043)] + [("parameters", 4 * chunk)] * world) * STEPS
    assert got["state_bytes"] == 2 * 4 * chunk  # the two moments of one range


def _reference(world):
    """One process's Adam on the workers' gradients summed in rank order."""
    net = _net()
    opt = net.opt = _opt(net)
    for step in range(STEPS):
        total = None
        for rank in range(world):  # the workers' gradients, summed in rank order
            _grads(net, rank, step)
            grads = [None if p.grad is None else p.grad.clone() for p in net.parameters()]
            total = grads if total is None else [a if a is None else a + b for a, b in zip(total, grads)]
        for p, g in zip(net.parameters(), total):
            p.grad = g
        opt.step()
    return net


def test_a_checkpoints_state_is_cut_into_the_ranges():
    """A resumed checkpoint fills the optimizer's whole state: each worker keeps its range of it and
    drops the rest (a single-process group is enough to read the pieces)."""
    net = _net()
    opt = _opt(net)
    _grads(net, 0, 0)
    opt.step()
    full = {p: {k: v.clone() for k, v in opt.state[p].items()} for p in opt.state}
    adam = PartitionedAdam(opt, 1, 2, None)
    assert not opt.state
    params = list(net.parameters())
    # range 1: the first weights from value 1024 on, then every other parameter that trains
    assert [(i, a, b) for i, a, b, _ in adam.pieces] == [(0, 1024, 3000), (1, 0, 10), (2, 0, 30), (4, 0, 3)]
    for i, a, b, at in adam.pieces:
        for k in ("exp_avg", "exp_avg_sq"):
            np.testing.assert_array_equal(adam.moments[k][at:at + b - a].numpy(),
                                          full[params[i]][k].reshape(-1)[a:b].numpy())
    assert adam.n_steps == 1 and all(float(s) == 1.0 for s in adam.steps)
