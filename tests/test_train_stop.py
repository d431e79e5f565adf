"""A stop request between sweeps (the first Ctrl-C or SIGTERM of ``topicir train``): the fit
writes the checkpoint of the sweep it has just finished and stops; a rerun resumes from it and
ends with the uninterrupted model, so a stop loses nothing. A second signal stops at once."""
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from models import LDA
from models.avipam.model import AVIPAM
from models.common import atomic
from models.common import checkpoint as ck
from models.common.stopping import StopWhen, TrainingStopped
from retrieval.core.index import build_index
from retrieval.core.modelfiles import index_corpus, load_model
from tests.test_avipam import KW as AVI_KW
from tests.test_avipam import pam4_corpus
from tests.test_checkpoint_writes import KINDS, assert_same_model, setup
from tests.test_reliability import cli
from tests.helpers import stop_at, stopped_at

DATA = Path(__file__).parent / "data"


def iteration(path):
    return ck.read_model_file(path, kind=ck.CHECKPOINT_FORMAT).header["iteration"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_stop_writes_the_sweep_it_follows_and_the_rerun_is_the_uninterrupted_model(kind, tmp_path):
    cls, params, corpus, inputs = setup(kind)  # checkpoints every 3 sweeps, samples from sweep 6
    full = cls(**params).fit(corpus, **inputs)
    path = tmp_path / "m.ckpt"
    e = stopped_at(lambda stop: cls(**params).fit(corpus, callback=stop, checkpoint=path, **inputs), path, 7)
    assert (e.iteration, e.n_iter, e.checkpoint, e.unit) == (7, 12, path, "sweep")
    assert str(e) == f"training stopped after sweep 7 of 12; {path} holds it"
    assert_same_model(cls(**params).fit(corpus, checkpoint=path, **inputs), full)


def test_a_stop_on_a_checkpoint_sweep_writes_it_once_and_without_a_checkpoint_keeps_nothing(tmp_path):
    cls, params, corpus, _ = setup("lda")
    path = tmp_path / "m.ckpt"
    model = cls(**params)
    with pytest.raises(TrainingStopped):
        model.fit(corpus, callback=stop_at(9), checkpoint=path)
    assert model.checkpoint_writes_[:, 0].tolist() == [3, 6, 9] and iteration(path) == 9
    with pytest.raises(TrainingStopped, match=r"^training stopped after sweep 5 of 12 \(no checkpoint: nothing kept\)$"):
        cls(**params).fit(corpus, callback=stop_at(5))


def test_stop_when_an_event_is_set_after_the_progress_callback(tmp_path):
    """The callback ``topicir train`` passes: its progress bar's, then the stop."""
    import threading

    cls, params, corpus, _ = setup("lda")
    event, calls = threading.Event(), []

    def progress(model, it, n_iter):
        calls.append(it)
        if it == 4:
            event.set()  # as a signal handler would, during sweep 5
    with pytest.raises(TrainingStopped) as e:
        cls(**params).fit(corpus, callback=StopWhen(event, progress), checkpoint=tmp_path / "m.ckpt")
    assert e.value.iteration == 4 and calls == [1, 2, 3, 4]
    stages = []
    StopWhen(event, type("Bar", (), dict(__call__=lambda *a: None, stage=lambda self, *a: stages.append(a)))()
             ).stage("finishing", 1, 2)
    StopWhen(event).stage("finishing", 1, 2)  # no inner callback: nothing to show
    assert stages == [("finishing", 1, 2)]


def test_a_variational_kind_stops_after_the_epoch(tmp_path):
    corpus = pam4_corpus()[0]
    kw = dict(AVI_KW, epochs=6, checkpoint_every=4)
    want = AVIPAM(**kw).fit(corpus)
    path = tmp_path / "avi.ckpt"
    e = stopped_at(lambda stop: AVIPAM(**kw).fit(corpus, callback=stop, checkpoint=path), path, 2)
    assert str(e).startswith("training stopped after epoch 2 of 6;")
    got = AVIPAM(**kw).fit(corpus, checkpoint=path)
    for name in ("topic_word_", "doc_mix_", "log_lik_", "sample_iter_"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)


def test_the_first_sigterm_of_train_stops_after_the_sweep_and_the_rerun_completes(tmp_path):
    index = build_index([DATA / "docs.trec"], tmp_path / "mini")
    out = tmp_path / "lda.npz"
    ckpt = out.with_name(out.name + ".ckpt")
    args = ["train", "lda", "--index", index.path, "--out", out, "--topics", 3, "--chains", 2,
            "--iterations", 3000, "--checkpoint-every", 1000, "--threads", 1]
    proc = started(cli(*args), out)
    proc.send_signal(signal.SIGTERM)  # during the start or a sweep: none of them a checkpoint's
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    done = iteration(ckpt)
    assert 0 < done < 1000  # the sweep the signal came in, not a scheduled checkpoint
    assert f"topicir train: stopped after sweep {done} of 3000, written to {ckpt}; rerun the same command" in err
    assert "stopping after the sweep in progress" in err and "Traceback" not in err
    proc = cli(*args)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    alone = LDA(n_topics=3, n_chains=2, n_iter=3000, seed=0, n_jobs=1).fit(index_corpus(index))
    terms = np.arange(index.stats.n_terms)
    np.testing.assert_array_equal(load_model(out, index).p_w_d(terms), alone.p_w_d(terms))


def test_a_second_signal_stops_at_once(tmp_path):
    """A stop takes effect where the callback runs: here only after the last sweep, so the
    training runs on after the first signal, and the second stops it at once, the sweeps since
    the last checkpoint lost. The signals come once sweeps run (a checkpoint written), not
    while numba loads the kernels, whose callbacks would swallow the interruption."""
    index = build_index([DATA / "docs.trec"], tmp_path / "mini")
    out = tmp_path / "lda.npz"
    ckpt = out.with_name(out.name + ".ckpt")
    proc = started(cli("-q", "train", "lda", "--index", index.path, "--out", out, "--topics", 3, "--chains", 2,
                       "--iterations", 100000, "--checkpoint-every", 1000, "--callback-every", 100000,
                       "--threads", 1), out)
    err = Stderr(proc)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and not ckpt.exists():
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    err.wait_for("stopping after the sweep in progress")
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=300)
    text = err.all()
    assert code == 130, text
    assert text.rstrip().endswith("topicir train: interrupted") and "Traceback" not in text, text
    assert iteration(ckpt) % 1000 == 0 and iteration(ckpt) < 100000


class Stderr:
    """A process's stderr, read line by line as it comes, by a thread of its own."""

    def __init__(self, proc):
        import threading

        self.chunks = []
        self.thread = threading.Thread(target=self._read, args=(proc.stderr,), daemon=True)
        self.thread.start()

    def _read(self, stream):
        for line in iter(stream.readline, ""):  # a line as soon as it is written
            self.chunks.append(line)

    def wait_for(self, text, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline and text not in "".join(self.chunks):
            time.sleep(0.05)
        assert text in "".join(self.chunks), "".join(self.chunks)

    def all(self):
        self.thread.join(timeout=60)
        return "".join(self.chunks)


def started(proc, out):
    """``proc`` once its training holds the model's lock (it has started, Ctrl-C is its own)."""
    lock = atomic.lock_path(out)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and not lock.exists():
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read()
    return proc


def test_log_lines_go_above_the_bar_at_the_handlers_level():
    """During ``topicir train`` the command's log lines are written through ``tqdm.write`` (above
    an open bar, not into its line), and its handler keeps its level: a library logger set to
    DEBUG still does not reach the screen."""
    import io
    import logging

    from tqdm import tqdm

    from retrieval.ui.logs import above_progress_bars, setup_logging

    setup_logging(quiet=True)
    handler = next(h for h in logging.getLogger().handlers if getattr(h, "topicir", False))
    screen = io.StringIO()
    handler.setStream(screen)
    noisy = logging.getLogger("models.common.executors.ray")
    noisy.setLevel(logging.DEBUG)
    try:
        with above_progress_bars():
            bar = tqdm(total=10, file=screen, desc="LDA")
            bar.update(3)
            noisy.debug("Ray: a worker died")
            logging.getLogger("topicir").warning("stopping after the sweep in progress")
            bar.close()
        assert handler.stream is screen
    finally:
        noisy.setLevel(logging.NOTSET)
        setup_logging(quiet=False)
    lines = screen.getvalue().replace("\r", "\n").splitlines()
    assert "topicir: warning: stopping after the sweep in progress" in lines  # a line of its own
    assert "Ray:" not in screen.getvalue()
