"""What a lost worker raises, importable without Ray (the CLI catches it)."""


class WorkerLostError(RuntimeError):
    """A worker died mid-training (an expected failure: a node lost, a process killed).

    ``worker`` says which, ``during`` in what step, ``checkpoint`` (None without one) and
    ``sweep`` where a rerun resumes. ``str()`` is the message for a caller of ``fit``;
    :meth:`rerun_message` the one for a command that resumes when run again.
    """

    def __init__(self, worker, during, checkpoint, sweep, cause):
        self.worker, self.during, self.checkpoint, self.sweep = worker, during, checkpoint, sweep
        if checkpoint is not None:
            how = (f"the checkpoint {checkpoint} holds sweep {sweep}; fit again with the same "
                   f"checkpoint to resume from there (the result is the model of an "
                   f"uninterrupted run)")
        else:
            how = "no checkpoint was given: pass checkpoint= (--checkpoint) to be able to resume"
        super().__init__(f"{worker} died during {during} ({cause}); training stopped, nothing "
                         f"after the last checkpoint is kept: {how}")

    def rerun_message(self) -> str:
        if self.checkpoint is None:
            return (f"{self.worker} died during {self.during}; training stopped with no "
                    f"checkpoint to resume from (rerun without --no-checkpoint to keep one)")
        return (f"{self.worker} died during {self.during}; rerun the same command to resume "
                f"from the checkpoint {self.checkpoint} (sweep {self.sweep})")
