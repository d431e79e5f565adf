"""The training loss's likelihood under M-step topics on the CPU, as one autograd function over
the numba pass of :mod:`models.avipam.pair_kernels`: the same values as the torch operations of
:meth:`models.avipam.nets.pam_net.PAMNet.loss` (a GPU's path), without forming the (entries x
sub-topics) products three times over."""
import torch

from ..pair_kernels import pair_pass


class _PairLogLik(torch.autograd.Function):
    @staticmethod
    def forward(ctx, mix, starts, cols, counts, phi_rows, em_counts):
        B, K = mix.shape
        log_lik = mix.new_empty(B)
        grad = mix.new_empty(B, K)
        pair_pass(starts.numpy(), cols.numpy(), counts.numpy(), mix.detach().contiguous().numpy(),
                  phi_rows.numpy(), em_counts.numpy(), log_lik.numpy(), grad.numpy())
        ctx.save_for_backward(grad)
        return log_lik

    @staticmethod
    def backward(ctx, grad_out):
        (grad,) = ctx.saved_tensors
        return grad_out[:, None] * grad, None, None, None, None, None


def pair_log_lik(mix, docs, phi_rows, em_counts):
    """Every document's sum_w x_dw log p(w | d) (B,) under the mixtures ``mix`` (B, K) and the
    topics ``phi_rows`` (V, K) at the entries of ``docs`` (:class:`models.avipam.nets.docs.Docs`),
    differentiable in ``mix``; adds the E-step's expected counts to ``em_counts`` (V, K)."""
    return _PairLogLik.apply(mix, docs.starts, docs.cols, docs.counts, phi_rows, em_counts)
