"""Independent aviPAM networks trained side by side on the same mini-batches, as the Gibbs kinds
run independent chains: the document model averages their P(w | d).

Every network keeps its own parameters, and the training loss is the sum of the networks' own
losses, so Adam (elementwise) moves each exactly as its loss alone would; they differ by their
initial weights and topics and by the noise and dropout they draw (one after another from the
same generator).
"""
import torch
from torch import nn


class ChainNets(nn.Module):
    """``nets`` (:class:`models._torch.pam_net.PAMNet`, the same architecture) as one module:
    :meth:`loss` gives every network's negative ELBO and KL of a batch, (n_chains, B) each."""

    def __init__(self, nets):
        super().__init__()
        self.chains = nn.ModuleList(nets)

    def loss(self, x, gen):
        out = [net.loss(x, gen) for net in self.chains]
        return torch.stack([o[0] for o in out]), torch.stack([o[1] for o in out])

    def dense_grads(self):
        for net in self.chains:
            net.dense_grads()

    def end_epoch(self):
        for net in self.chains:
            net.end_epoch()


def chain_list(net):
    """The networks of ``net``: its chains, or [net] for a single network."""
    return list(net.chains) if isinstance(net, ChainNets) else [net]
