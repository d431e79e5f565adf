"""Progress reporting as a training callback (cf. tomotopy's ``train`` callbacks)."""


class TqdmCallback:
    """``callback(model, iteration, n_iter)`` that drives a tqdm bar and shows the last figure
    of the training trace, averaged over chains, under the model's ``log_lik_label``:
    ``ll_per_token`` (a Gibbs kind's log p(W, Z) per token) or ``elbo_per_token`` (a
    variational kind's ELBO per token); and, for a model that records one, the last
    document-completion log-likelihood per token of its training sample, ``dc_ll_per_token``
    (see :func:`models.common.heldout.training_completion`).

    Parameters
    ----------
    desc : str
    **tqdm_kwargs
        Passed to ``tqdm.tqdm``.
    """

    def __init__(self, desc="LDA", **tqdm_kwargs):
        self.desc = desc
        self.tqdm_kwargs = tqdm_kwargs
        self._bar = None
        self._stage = None

    def __call__(self, model, iteration, n_iter):
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(total=n_iter, desc=self.desc, **self.tqdm_kwargs)
            self._bar.update(iteration - 1 if iteration > 0 else 0)
        self._bar.update(iteration - self._bar.n)
        post = {}
        ll = getattr(model, "_log_lik_rows", None)
        if ll:
            post[getattr(model, "log_lik_label", "ll_per_token")] = f"{sum(ll[-1]) / len(ll[-1]):.4f}"
        dc = getattr(model, "_dc_rows", None)
        if dc:
            post["dc_ll_per_token"] = f"{dc[-1]:.4f}"
        st = getattr(model, "executor_stats_", None)  # set by a Ray executor
        if st and st.get("sweeps"):
            post.update(rounds=st["rounds"], tok_s=f"{st['tokens_per_s'] / 1e6:.2f}M",
                        MB_sweep=f"{(st['slice_bytes_per_sweep'] + st['n_k_bytes_per_sweep']) / 1e6:.2f}")
        if post:
            self._bar.set_postfix(post)
        if iteration >= n_iter:
            self._bar.close()
            self._bar = None

    def close(self):
        """Closes the bars still open (a training stopped before its last sweep), so that what
        is printed next starts on a line of its own."""
        for bar in (self._bar, self._stage):
            if bar is not None:
                bar.close()
        self._bar = self._stage = None

    def stage(self, what, done, total):
        """A step of training after the iterations (``what``: what it does, ``done`` of
        ``total`` units finished), on a bar of its own."""
        if self._stage is None:
            from tqdm import tqdm

            self._stage = tqdm(total=total, desc=f"{self.desc}: {what}", **self.tqdm_kwargs)
        self._stage.update(done - self._stage.n)
        if done >= total:
            self._stage.close()
            self._stage = None
