"""aviPAM's ``executor`` and ``n_workers``, read without importing Ray."""
from ..common.executors import parse_executor


def ray_target(model):
    """``(address, n_workers)`` of the Ray cluster ``model`` trains on, or None to train in this
    process. ``executor`` may be a :class:`models.common.executors.ray.RayExecutor`, whose
    ``n_workers`` counts when the model's is None."""
    spec = model.executor
    if hasattr(spec, "runner"):
        return spec.address, spec.n_workers if model.n_workers is None else model.n_workers
    kind, address = parse_executor(spec)
    return None if kind == "local" else (address, model.n_workers)


def check_executor(model):
    ray_target(model)  # refuses an executor it cannot read
    n = model.n_workers
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ValueError(f"n_workers must be an int >= 1 or None, got {n!r}")


def on_ray(model):
    return ray_target(model) is not None
