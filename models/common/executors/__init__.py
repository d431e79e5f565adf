"""Where a Gibbs trainer runs its sweeps: the executor protocol.

:meth:`models.common.gibbs.GibbsModel.fit` drives a *runner* through the fit loop:

``start(model, corpus, checkpoint)``
    after the chains are initialised (or resumed from a checkpoint) on the driver;
``step(model, corpus, it)``
    sweep ``it`` of every chain;
``sync(model, counts, assignments)``
    before the loop reads chain state: ``counts`` (topic-word and doc-topic counts, for the
    log-likelihood and kept samples) and/or ``assignments`` (z and the rng streams, for
    checkpoints and the end of training) must then be current in the model's arrays;
``checkpointed(iteration)``
    after the driver wrote a checkpoint;
``close()``
    always, at the end (also after an error).

The local runner sweeps in this process with numba threads and is the default: without an
``executor`` nothing changes and Ray is never imported. ``executor`` is a string

``"local"``
    this process (threads: ``n_jobs``);
``"ray"``
    Ray (:mod:`models.common.executors.ray`, through the runner the model class gives:
    ``_ray_runner(executor)``): the cluster named by ``RAY_ADDRESS`` if set, else a local one
    started here, or the one already initialised in this process;
``"ray:ADDRESS"`` / ``"ray://HOST:PORT"``
    the Ray cluster at ADDRESS (``auto``, ``HOST:PORT``, or a Ray client address);

or a :class:`models.common.executors.ray.RayExecutor` (to choose the number of workers).
"""

from .errors import WorkerLostError  # noqa: F401  (here without Ray, for the CLI)

LOCAL = "local"
# Model kinds whose sweeps the Ray executor can run.
RAY_KINDS = ("lda", "pam", "tcm", "glda", "tree-lda")


class LocalRunner:
    """Sweeps in this process (numba threads); chain state never leaves the model."""

    def start(self, model, corpus, checkpoint):
        if hasattr(model, "executor_stats_"):  # from an earlier fit on Ray
            del model.executor_stats_

    def step(self, model, corpus, it):
        model._step(corpus, it)

    def sync(self, model, counts, assignments):
        pass

    def checkpointed(self, iteration):
        pass

    def close(self):
        pass


def parse_executor(spec):
    """``(kind, address)`` of an executor string: ("local", None), ("ray", None or ADDRESS)."""
    if spec is None or spec == LOCAL:
        return LOCAL, None
    if not isinstance(spec, str):
        raise ValueError(f"executor must be 'local', 'ray', 'ray:ADDRESS' or a RayExecutor, got {spec!r}")
    if spec == "ray":
        return "ray", None
    if spec.startswith("ray://"):
        return "ray", spec
    if spec.startswith("ray:") and len(spec) > 4:
        return "ray", spec[4:]
    raise ValueError(f"executor must be 'local', 'ray', 'ray:ADDRESS' (e.g. 'ray:auto', "
                     f"'ray:10.0.0.1:6379') or 'ray://HOST:PORT', got {spec!r}")


def executor_from_flag(ray, state="driver"):
    """The ``executor`` of the CLI flag ``--ray [ADDRESS]``: None (flag absent) -> "local", ""
    or True (``--ray`` alone) -> "ray", ADDRESS -> "ray:ADDRESS" (a ``ray://`` address as is);
    with ``state="workers"`` (``--ray-state workers``), a ``RayExecutor`` of that state."""
    if ray is None or ray is False:
        return LOCAL
    spec = "ray" if ray is True or ray == "" else ray if ray.startswith("ray://") else f"ray:{ray}"
    if state == "driver":
        return spec
    from .ray import RayExecutor  # imports Ray

    return RayExecutor(address=parse_executor(spec)[1], state=state)


def make_runner(model):
    """The runner of ``model.executor`` (models without that parameter run locally)."""
    spec = getattr(model, "executor", LOCAL)
    if hasattr(spec, "runner"):  # an executor object (RayExecutor)
        executor = spec
    else:
        kind, address = parse_executor(spec)
        if kind == LOCAL:
            return LocalRunner()
        executor = None
    if model.kind not in RAY_KINDS:
        raise ValueError(f"executor={spec!r}: the Ray executor runs {', '.join(RAY_KINDS)} models, "
                         f"not {model.kind!r}; train {model.kind} with executor='local'")
    if executor is None:
        from .ray import RayExecutor  # imports Ray

        executor = RayExecutor(address=address)
    return executor.runner(model)

from .memory import peak_memory  # noqa: E402,F401  (re-exported for callers of the package)
