"""The encoders' first layer: the documents' term counts in, a V-sized weight read and updated
row by row."""
import torch
from torch import nn
from torch.nn import functional as F


class _BatchRows(torch.autograd.Function):
    """embedding_bag's sum of a batch's rows, whose gradient is summed term by term from the
    batch's ``by_term`` counts (:class:`models.avipam.nets.docs.Docs`): a coalesced sparse gradient,
    one row per distinct term, each a sum in document order."""

    @staticmethod
    def forward(ctx, rows, cols, starts, counts, by_term):
        ctx.by_term, ctx.shape = by_term, rows.shape
        return F.embedding_bag(cols, rows, starts, mode="sum", per_sample_weights=counts)

    @staticmethod
    def backward(ctx, grad_out):
        terms, counts = ctx.by_term
        values = torch.from_numpy(counts @ grad_out.contiguous().numpy())
        grad = torch.sparse_coo_tensor(terms[None], values, ctx.shape, is_coalesced=True,
                                       check_invariants=False)
        return grad, None, None, None, None


class TermLayer(nn.Module):
    """The encoders' first layer, an affine map of the documents' term counts whose weight is
    stored term-major, ``rows`` (V, width): a batch of :class:`models.avipam.nets.docs.Docs`
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
        self._by_term = False  # whether the last batch's gradient is summed by term

    def forward(self, x):
        if isinstance(x, torch.Tensor):
            return torch.addmm(self.bias, x, self.rows)
        counts = x.counts.to(self.rows.dtype)
        self._by_term = x.by_term is not None and self.rows.requires_grad and torch.is_grad_enabled()
        if self._by_term:
            return _BatchRows.apply(self.rows, x.cols, x.starts, counts, x.by_term) + self.bias
        return F.embedding_bag(x.cols, self.rows, x.starts, mode="sum", sparse=True,
                               per_sample_weights=counts) + self.bias

    def dense_grad(self):
        """The sparse gradient of a batch (the rows of its terms) as the dense one Adam reads,
        written into a buffer kept from step to step: only the previous step's rows are cleared,
        never the whole (V, width) matrix."""
        g = self.rows.grad
        if g is None or not g.is_sparse:
            return
        if not self._by_term:  # the CPU batches' gradient has one entry per row already
            g = g.coalesce()
        rows, values = g._indices()[0], g._values()
        if self._grad is None or self._grad.device != self.rows.device:
            self._grad = torch.zeros_like(self.rows)
            self._grad_rows = rows[:0]
        if self._grad.device.type == "cpu":
            from ..row_kernels import move_rows

            move_rows(self._grad.numpy(), self._grad_rows.numpy(), rows.numpy(),
                      values.contiguous().numpy())
        else:
            self._grad.index_fill_(0, self._grad_rows, 0.0)
            self._grad.index_copy_(0, rows, values)
        self._grad_rows = rows
        self.rows.grad = self._grad

    def summed_rows(self):
        """The rows that hold the last batch's dense gradient (:meth:`dense_grad`), or None when
        its gradient is not that buffer."""
        return self._grad_rows if self.rows.grad is not None and self.rows.grad is self._grad else None

    def set_grad_rows(self, rows, values):
        """Rows ``rows`` (sorted, the last batch's among them) of the dense gradient set to
        ``values``, e.g. their sums over data-parallel workers; the next batch clears them."""
        self._grad.index_copy_(0, rows, values)
        self._grad_rows = rows
