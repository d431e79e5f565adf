"""Stopping a training between sweeps (epochs) with a checkpoint of the last one.

A training callback (``fit(corpus, callback=...)``) raises :class:`StopTraining` to ask for a
stop; the fit loop then writes the checkpoint of the sweep just finished, unless it has just
written it, and raises :class:`TrainingStopped`. Rerunning the fit with the same checkpoint
resumes from that sweep and ends with the model of an uninterrupted run, so a stop loses no
sweep (a Ctrl-C through KeyboardInterrupt loses those since the last checkpoint).
"""
from contextlib import contextmanager


class StopTraining(Exception):
    """Raised by a training callback: stop after this sweep (epoch), its checkpoint written."""


class TrainingStopped(Exception):
    """A fit stopped at a callback's request after ``unit`` (sweep or epoch) ``iteration`` of
    ``n_iter``; ``checkpoint`` holds it (None: the fit had no checkpoint, and nothing is kept)."""

    def __init__(self, iteration, n_iter, checkpoint, unit="sweep"):
        self.iteration, self.n_iter, self.checkpoint, self.unit = iteration, n_iter, checkpoint, unit
        where = f"; {checkpoint} holds it" if checkpoint is not None else " (no checkpoint: nothing kept)"
        super().__init__(f"training stopped after {unit} {iteration} of {n_iter}{where}")


@contextmanager
def stop_point(done, n_iter, checkpoint, write=None, unit="sweep"):
    """Around a fit loop's callback call after sweep (epoch) ``done``: a :class:`StopTraining`
    from it writes the checkpoint (``write()``, None where the loop has just written it) and
    becomes :class:`TrainingStopped`."""
    try:
        yield
    except StopTraining:
        if checkpoint is not None and write is not None:
            write()
        raise TrainingStopped(done, n_iter, checkpoint, unit) from None


class StopWhen:
    """A training callback that raises :class:`StopTraining` once ``event.is_set()`` (e.g. a
    ``threading.Event`` set by a signal handler or another thread), after calling ``inner`` (a
    progress callback such as :class:`models.common.progress.TqdmCallback`, or None)."""

    def __init__(self, event, inner=None):
        self.event, self.inner = event, inner

    def __call__(self, model, iteration, n_iter):
        if self.inner is not None:
            self.inner(model, iteration, n_iter)
        if self.event.is_set():
            raise StopTraining

    def close(self):
        """Closes the inner callback's bars, where it has any."""
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()

    def stage(self, what, done, total):
        """The inner callback's bar for a step after the iterations, where it has one."""
        stage = getattr(self.inner, "stage", None)
        if stage is not None:
            stage(what, done, total)
