"""The encoders' first layer: the documents' term counts in, a V-sized weight read and updated
row by row."""
import torch
from torch import nn
from torch.nn import functional as F


class TermLayer(nn.Module):
    """The encoders' first layer, an affine map of the documents' term counts whose weight is
    stored term-major, ``rows`` (V, width): a batch of :class:`models._torch.pam_net.Docs`
    (a dense (B, V) tensor goes through one product) is a sum over every
    document's nonzero entries of count times its term's row (embedding_bag, never a (B, V)
    product), and the gradient is written row by row where a (width, V) weight would need a
    transposed copy of the whole matrix every step. Initialised as ``nn.Linear(V, width)``,
    with the same draws."""

    def __init__(self, n_terms, width):
        super().__init__()
        linear = nn.Linear(n_terms, width)
        self.rows = nn.Parameter(linear.weight.detach().T.contiguous())
        self.bias = nn.Parameter(linear.bias.detach().clone())
        self._grad, self._grad_rows = None, None  # dense_grad's buffer, not part of the state

    def forward(self, x):
        if not isinstance(x, torch.Tensor):  # Docs: the batch's nonzero counts
            return F.embedding_bag(x.cols, self.rows, x.starts, mode="sum", sparse=True,
                                   per_sample_weights=x.counts.to(self.rows.dtype)) + self.bias
        return torch.addmm(self.bias, x, self.rows)

    def dense_grad(self):
        """The sparse gradient of a batch (the rows of its terms) as the dense one Adam reads,
        written into a buffer kept from step to step: only the previous step's rows are cleared,
        never the whole (V, width) matrix."""
        g = self.rows.grad
        if g is None or not g.is_sparse:
            return
        g = g.coalesce()
        rows = g.indices()[0]
        if self._grad is None or self._grad.device != self.rows.device:
            self._grad = torch.zeros_like(self.rows)
        else:
            self._grad.index_fill_(0, self._grad_rows, 0.0)
        self._grad.index_copy_(0, rows, g.values())
        self._grad_rows = rows
        self.rows.grad = self._grad
