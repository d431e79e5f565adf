"""Independent aviPAM networks trained side by side on the same mini-batches, as the Gibbs kinds
run independent chains: the document model averages their P(w | d).

Every network keeps its own parameters, and the training loss is the sum of the networks' own
losses, so Adam (elementwise) moves each exactly as its loss alone would; they differ by their
initial weights and topics and by the noise and dropout they draw (one after another from the
same generator). With threads to spare, the networks' steps run side by side
(:meth:`ChainNets.loss_backward`), each from the generator state it would have reached in turn.
"""
import torch
from torch import nn

from ...common.variational import training_loss
from .pam_net import batch_size


class ChainNets(nn.Module):
    """``nets`` (:class:`models.avipam.nets.pam_net.PAMNet`, the same architecture) as one module:
    :meth:`loss` gives every network's negative ELBO and KL of a batch, (n_chains, B) each."""

    def __init__(self, nets):
        super().__init__()
        self.chains = nn.ModuleList(nets)

    def loss(self, x, gen):
        out = [net.loss(x, gen) for net in self.chains]
        return torch.stack([o[0] for o in out]), torch.stack([o[1] for o in out])

    def loss_backward(self, x, gen, kl_weight, pool):
        """The training step's loss and backward pass of every network on a thread of ``pool``,
        each drawing from a copy of ``gen`` at the state where :meth:`loss` would have reached
        it (``gen`` is advanced past all of them): the gradients, dense ones included, and the
        draws of :meth:`loss` followed by one backward pass, bit for bit. Returns the negative
        ELBO and KL of every network, (n_chains, B) each."""
        n_docs = batch_size(x)[0]
        states = []
        for net in self.chains:
            states.append(gen.get_state())
            net.skip_draws(n_docs, gen)

        def one(c):
            g = torch.Generator(device=gen.device)
            g.set_state(states[c])
            net = self.chains[c]
            neg_elbo, kl = net.loss(x, g)
            training_loss(neg_elbo, kl, kl_weight).backward()
            net.dense_grads()
            return neg_elbo.detach(), kl.detach()

        out = list(pool.map(one, range(len(self.chains))))
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
