"""``topicir bench full``: the user's commands run in child processes and measured
(retrieval.bench.full_child), the state that lets a rerun go on (retrieval.bench.full), and the
table beside the projection of ``bench scale`` (retrieval.bench.full_table)."""
from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, sigint_as_from_a_terminal
from retrieval.bench import full, full_child, full_table
from retrieval.core.machine import cpu_model
from retrieval.bench.full_child import Interrupted, run_measured
from retrieval.bench.full_table import duration, read_projection, tables
from retrieval.datasets.ap_synth import Vocabulary

PROJECTION = ROOT / "docs" / "results" / "bench-scale.md"
MiB = 2**20


def _script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "child.py"
    path.write_text(textwrap.dedent(body))
    return [sys.executable, str(path)]


# -- one measured child --------------------------------------------------------------------------

def test_a_child_is_measured_whole_cpu_memory_and_disk_writes(tmp_path):
    cmd = _script(tmp_path, f"""
        import os, sys, time
        block = bytearray(300 * {MiB})       # touched: resident
        for i in range(0, len(block), 4096):
            block[i] = 1
        end = time.process_time() + 0.4
        while time.process_time() < end:
            pass
        with open({str(tmp_path / 'out.bin')!r}, 'wb') as f:
            f.write(os.urandom(8 * {MiB}))
            f.flush()
            os.fsync(f.fileno())
        print('done')
        sys.exit(3)
    """)
    # A parent larger than the child: Linux raises the child's ru_maxrss to the parent's at fork.
    ballast = bytearray(1200 * MiB)
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1
    part = run_measured(cmd, tmp_path / "logs" / "child.log")
    del ballast
    assert part["exit"] == 3 and part["interrupted"] is None
    assert part["user_s"] + part["sys_s"] >= 0.4
    assert part["wall_s"] >= 0.4
    assert 0.29 <= part["peak_gib"] < 1.0
    assert part["written_bytes"] >= 8 * MiB
    assert part["wchar_bytes"] >= 8 * MiB
    assert len(part["load"]) == 2 and min(part["load"]) >= 0
    assert part["cpu"] == cpu_model()
    log = (tmp_path / "logs" / "child.log").read_text()
    assert log.splitlines()[1].startswith("$ ") and "child.py" in log and log.rstrip().endswith("done")


@pytest.mark.parametrize("sigint", ["default", "ignored"])
def test_a_deadline_asks_a_training_to_stop_after_its_sweep_in_progress(tmp_path, sigint):
    """The child (as ``topicir train``) takes the SIGTERM sent at the deadline as a request: it
    ends the sweep in progress, writes its checkpoint and exits 130. Also when the child starts
    with SIGINT ignored, as a command started in the background (nohup, a script's `&`) does."""
    ckpt = tmp_path / "model.npz.ckpt"
    cmd = _script(tmp_path, f"""
        import os, signal, sys, time
        asked = []
        signal.signal(signal.SIGTERM, lambda signum, frame: asked.append(time.time()))
        for n in range(1, 400):
            time.sleep(0.2)  # a sweep
            if n % 5 == 0 or asked:
                with open({str(tmp_path / '.model.npz.ckpt.tmp')!r}, 'wb') as f:
                    f.write(b'x' * 1000 * n)
                os.replace({str(tmp_path / '.model.npz.ckpt.tmp')!r}, {str(ckpt)!r})
            if asked:
                print('stopped after sweep', n, 'asked at', asked[0])
                sys.exit(130)
    """)
    before = signal.signal(signal.SIGINT, signal.SIG_IGN if sigint == "ignored" else signal.default_int_handler)
    try:  # the child inherits an ignored SIGINT
        deadline = time.time() + 1.5
        part = run_measured(cmd, tmp_path / "train.log", checkpoint=ckpt, deadline=deadline)
    finally:
        signal.signal(signal.SIGINT, before)
    assert part["exit"] == 130 and part["interrupted"] == "deadline"
    words = (tmp_path / "train.log").read_text().split()
    sweep, asked = int(words[-4]), float(words[-1])
    assert deadline <= asked < deadline + 1.0  # signalled when the deadline came, not at a checkpoint
    assert part["wall_s"] < 10 and 5 <= sweep < 15
    assert part["checkpoints"] >= 2 and part["checkpoint_max_bytes"] == 1000 * sweep
    # when each write was seen; these files are no checkpoints topicir reads, so no sweep
    seconds = [t for t, _ in part["checkpoint_times"]]
    assert len(seconds) == part["checkpoints"] and seconds == sorted(seconds) and 0.9 < seconds[0] < seconds[-1] < 10
    assert all(sweep is None for _, sweep in part["checkpoint_times"])


def test_a_child_that_still_finishes_after_the_deadline_is_not_marked_stopped(tmp_path):
    """Signalled as it saves its model, a training finishes: its part is a finished one."""
    cmd = _script(tmp_path, """
        import signal, time
        signal.signal(signal.SIGTERM, lambda signum, frame: None)
        time.sleep(1.0)
    """)
    part = run_measured(cmd, tmp_path / "train.log", checkpoint=tmp_path / "none.ckpt", deadline=time.time() + 0.3)
    assert part["exit"] == 0 and part["interrupted"] is None and part["checkpoints"] == 0


def test_ctrl_c_stops_the_child_and_keeps_the_part_it_ran(tmp_path, monkeypatch):
    # the child's exit on a loaded machine (another training beside the tests) can take seconds
    monkeypatch.setattr(full_child, "GRACE_S", 6.0)
    ready = tmp_path / "ready"
    # the child takes SIGINT as Ctrl-C even where the tests run in the background, whose
    # children start with SIGINT ignored (the next test's child)
    cmd = _script(tmp_path, f"""
        import signal, sys, time
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            open({str(ready)!r}, 'w').close()
            time.sleep(60)
        except KeyboardInterrupt:
            sys.exit(130)
    """)

    def ctrl_c(pid):
        # Ctrl-C once the child waits in its try block (a loaded machine starts Python slowly)
        limit = time.time() + 60
        while not ready.exists() and time.time() < limit:
            time.sleep(0.05)
        time.sleep(0.5)
        raise KeyboardInterrupt

    with pytest.raises(Interrupted) as e:
        run_measured(cmd, tmp_path / "c.log", on_start=ctrl_c)
    part = e.value.part
    assert part["exit"] == 130 and part["interrupted"] == "ctrl-c"
    assert 0.5 <= part["wall_s"] < 20


def test_a_child_that_ignores_ctrl_c_is_terminated_after_the_grace(tmp_path, monkeypatch):
    monkeypatch.setattr(full_child, "GRACE_S", 0.5)
    ready = tmp_path / "ready"
    cmd = _script(tmp_path, f"""
        import signal, time
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        open({str(ready)!r}, 'w').close()
        time.sleep(60)
    """)

    def ctrl_c(pid):
        limit = time.time() + 60
        while not ready.exists() and time.time() < limit:
            time.sleep(0.05)
        raise KeyboardInterrupt

    with pytest.raises(Interrupted) as e:
        run_measured(cmd, tmp_path / "c.log", on_start=ctrl_c)
    assert e.value.part["exit"] == -signal.SIGTERM and e.value.part["interrupted"] == "ctrl-c"


# -- the state -----------------------------------------------------------------------------------

SETTINGS = dict(docs=250_000, terms=200_000, seed=0, threads=2, iterations=None)


def test_a_state_of_other_settings_is_refused(tmp_path):
    path = tmp_path / full.STATE
    full.save_state(path, full.load_state(path, SETTINGS))
    assert full.load_state(path, SETTINGS)["settings"] == SETTINGS
    with pytest.raises(ValueError, match=r"--docs 250000 there, 2000 now.*another --work"):
        full.load_state(path, dict(SETTINGS, docs=2000))
    path.write_text("{")
    with pytest.raises(ValueError, match="not a bench full state file"):
        full.load_state(path, SETTINGS)


def test_a_step_left_running_by_a_killed_benchmark_is_a_lost_part(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    state = dict(format=full.FORMAT, settings=SETTINGS, steps={},
                 running=dict(step="train-lda", pid=int(dead.stdout), pid_start=1, started="2026-01-01T00:00:00Z"))
    assert full.process_start(int(dead.stdout)) is None and full.process_start(os.getpid()) > 0
    full._recover(state, tmp_path / full.STATE)
    assert "running" not in state
    assert state["steps"]["train-lda"]["parts"] == [dict(started="2026-01-01T00:00:00Z", exit=None, interrupted="lost")]
    # its child still runs: refused; a later process given the same pid is not it
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        state["running"] = dict(step="train-lda", pid=live.pid, pid_start=full.process_start(live.pid) + 1,
                                started="2026-01-01T01:00:00Z")
        full._recover(state, tmp_path / full.STATE)
        assert [p["started"] for p in state["steps"]["train-lda"]["parts"]] == ["2026-01-01T00:00:00Z",
                                                                                "2026-01-01T01:00:00Z"]
        state["running"] = dict(step="train-lda", pid=live.pid, pid_start=full.process_start(live.pid),
                                started="2026-01-01T02:00:00Z")
        with pytest.raises(RuntimeError, match=rf"train-lda step of an earlier run is still running \(pid {live.pid}\)"):
            full._recover(state, tmp_path / full.STATE)
    finally:
        live.kill()
        live.wait()


# -- the table -----------------------------------------------------------------------------------

def _part(wall, cpu, peak, written, **extra):
    return dict(started="2026-01-01T00:00:00Z", exit=0, interrupted=None, wall_s=wall, user_s=cpu * 0.75,
                sys_s=cpu * 0.25, peak_gib=peak, written_bytes=written, wchar_bytes=written, **extra)


def _info(**settings):
    return dict(SETTINGS, **settings, vocab=Vocabulary(["a", "b", "c"], 2, "test"), gen_s=0.0)


def test_the_projection_is_read_from_bench_scales_generated_file():
    proj = read_projection(PROJECTION)
    assert proj["docs"] == 250_000 and "bench scale" in proj["command"]
    figures = proj["figures"]
    assert figures["lda: default training (3 chains x 100 sweeps)"] == (20.6, "min")
    assert figures["indexing 250,000 documents (wall)"] == (1.5, "min")
    assert figures["lda: 100-query batch with the model"] == (1.19, "s")
    assert figures["avipam: peak memory"] == (4.72, "GiB")
    assert read_projection(PROJECTION.with_name("no-such.md")) is None


def test_measured_figures_sit_beside_the_projection_with_their_ratios():
    steps = full.plan(Path("w"), ["lda"], 2, None)
    G = 2**30
    state = dict(format=full.FORMAT, settings=SETTINGS, steps={
        "index": dict(done=True, parts=[_part(120.0, 200.0, 2.5, 3 * G)],
                      output=dict(bytes=G, n_docs=250_000, n_terms=200_000, n_tokens=70_500_000)),
        "ql": dict(done=True, parts=[_part(14.0, 12.0, 3.0, 20 * MiB)], output=dict(bytes=MiB, topics=100, lines=100_000),
                   batch=dict(batch_s=0.28, first_s=1.5, wall_s=9.0)),
        # interrupted at a checkpoint and resumed: the parts add up, the peak is the larger one
        "train-lda": dict(done=True, output=dict(bytes=2 * G), parts=[
            dict(_part(600.0, 1100.0, 10.0, 3 * G, checkpoints=3), exit=130, interrupted="deadline",
                 checkpoint_times=[[300.0, 10], [450.0, 20], [599.5, None]]),
            _part(900.0, 1700.0, 11.0, 2 * G, checkpoints=7)]),
    })
    main, parts = tables(state, steps, ["lda"], PROJECTION, _info())
    assert main.title == "The user's path measured, beside the projection"
    rows = {r["step"]: r for r in main.rows}
    assert rows["index"]["command"] == "`topicir index w/ap --out w/index --threads 2`"
    assert (rows["index"]["wall"], rows["index"]["projected wall"], rows["index"]["wall: measured / projected"]) == \
        ("2.0 min", "90.0 s", "1.33")
    assert (rows["index"]["peak memory"], rows["index"]["projected peak"], rows["index"]["peak: measured / projected"]) \
        == ("2.50 GiB", "2.19 GiB", "1.14")
    assert rows["ql"]["wall: measured / projected"] == "100.00" and rows["ql"]["made"] == "100 topics, 100,000 lines"
    # the batch alone, timed as the projection times it: its ratio is the projection's error
    assert (rows["ql"]["batch alone"], rows["ql"]["batch: measured / projected"]) == ("0.28 s", "2.00")
    assert rows["index"]["batch alone"] == rows["train-lda"]["batch alone"] == ""
    t = rows["train-lda"]
    assert t["status"] == "measured in 2 parts (resumed)"
    assert (t["wall"], t["projected wall"], t["wall: measured / projected"]) == ("25.0 min", "20.6 min", "1.21")
    assert (t["CPU (user + sys)"], t["peak memory"], t["peak: measured / projected"]) == ("46.7 min", "11.00 GiB", "0.97")
    assert (t["written to disk"], t["checkpoints written"], t["made"]) == ("5.00 GiB", "10", "2.00 GiB")
    r = rows["run-lda"]
    assert (r["status"], r["wall"], r["projected wall"], r["wall: measured / projected"]) == ("projected", "", "1.19 s", "")
    assert (r["batch alone"], r["batch: measured / projected"]) == ("", "")
    assert [(p["step"], p["part"], p["ended"], p["wall"]) for p in parts.rows] == [
        ("index", 1, "finished", "2.0 min"), ("ql", 1, "finished", "14.0 s"),
        ("train-lda", 1, "stopped at a checkpoint (--stop-after)", "10.0 min"), ("train-lda", 2, "finished", "15.0 min")]
    # the pace of a training: each checkpoint's sweep and when it was written (an older record: none)
    pace = [p["checkpoints: sweep at time into the part"] for p in parts.rows]
    assert pace == ["", "", "10 at 5.0 min, 20 at 7.5 min, ? at 10.0 min", ""]
    assert any("Trainings at each kind's defaults." == n for n in main.notes)


def test_a_run_not_at_the_projections_size_or_schedule_gets_no_ratio():
    steps = full.plan(Path("w"), ["lda"], 2, 3)
    assert steps[2].args[-2:] == ("--iterations", "3")
    state = dict(steps={"train-lda": dict(parts=[dict(_part(60.0, 100.0, 1.0, MiB, checkpoints=1), exit=130,
                                                      interrupted="ctrl-c"),
                                                 dict(started="x", exit=None, interrupted="lost")])})
    main, _ = tables(state, steps, ["lda"], PROJECTION, _info(docs=2000, iterations=3))
    assert "no ratios" in main.title
    rows = {r["step"]: r for r in main.rows}
    assert rows["train-lda"]["status"] == \
        "in progress: 2 part(s), 60.0 s so far, peak memory 1.00 GiB; 1 part not measured: a lower bound; projected"
    assert all(r["wall: measured / projected"] == "" and r["wall"] == "" for r in main.rows)
    assert any("--iterations 3" in n and "NOT the default schedule" in n for n in main.notes)
    none, _ = tables(state, steps, ["lda"], Path("no-such.md"), _info(iterations=3))
    assert none.rows[0]["projected wall"] == "" and any("No projection" in n for n in none.notes)


def test_parts_before_a_start_from_scratch_are_shown_but_not_counted(tmp_path):
    """A training stopped before its first checkpoint starts again from scratch: the figures
    count the parts from that start on, and an unfinished one says the sweep it reached."""
    steps = full.plan(Path("w"), ["pam"], 2, None)
    before = dict(_part(2400.0, 2900.0, 5.0, MiB), exit=130, interrupted="ctrl-c")  # an old record: no sweeps
    state = dict(steps={"train-pam": dict(parts=[
        before, dict(_part(600.0, 1100.0, 4.0, MiB, checkpoints=1), exit=130, interrupted="deadline",
                     sweep_start=0, sweep_end=10, sweeps=100),
        dict(_part(300.0, 500.0, 4.0, MiB, checkpoints=1), exit=130, interrupted="deadline",
             sweep_start=10, sweep_end=20, sweeps=100, cpu="Other CPU")])})
    main, parts = tables(state, steps, ["pam"], PROJECTION, _info())
    # each part says the machine it ran on, where its record has it
    assert [p["CPU"] for p in parts.rows if p["step"] == "train-pam"] == ["", "", "Other CPU"]
    row = {r["step"]: r for r in main.rows}["train-pam"]
    assert row["status"] == ("in progress: 2 part(s), 15.0 min so far, checkpoint at sweep 20 of 100, peak memory 4.00 GiB; "
                             "1 earlier part(s) thrown away by a start from scratch, not counted; projected")
    ended = [p["ended"] for p in parts.rows if p["step"] == "train-pam"]
    assert ended == ["interrupted (Ctrl-C or SIGTERM); thrown away (the next part started from scratch), not counted",
                     "stopped at a checkpoint (--stop-after) at sweep 10",
                     "stopped at a checkpoint (--stop-after) at sweep 20"]
    # finished after a restart: the measured figures are those of the parts that count
    state["steps"]["train-pam"]["parts"][2].update(exit=0, interrupted=None, sweep_end=None)
    state["steps"]["train-pam"].update(done=True, output=dict(bytes=MiB))
    row = {r["step"]: r for r in tables(state, steps, ["pam"], PROJECTION, _info())[0].rows}["train-pam"]
    assert row["status"].startswith("measured in 2 parts (resumed); 1 earlier part(s) thrown away")
    assert (row["wall"], row["CPU (user + sys)"]) == ("15.0 min", "26.7 min")
    # a part recorded without its sweep: the row reads it from the checkpoint left
    work = tmp_path / "w"
    (work / "models").mkdir(parents=True)
    header = json.dumps(dict(iteration=30, params=dict(n_iter=100))).encode()
    with open(work / "models" / "pam.npz.ckpt", "wb") as fh:
        np.savez(fh, __header__=np.frombuffer(header, np.uint8))
    state["steps"]["train-pam"] = dict(parts=[dict(_part(60.0, 100.0, 1.0, MiB, checkpoints=3), exit=130,
                                                   interrupted="ctrl-c")])
    row = {r["step"]: r for r in tables(state, full.plan(work, ["pam"], 2, None), ["pam"], PROJECTION,
                                        _info())[0].rows}["train-pam"]
    assert row["status"] == "in progress: 1 part(s), 60.0 s so far, checkpoint at sweep 30 of 100, peak memory 1.00 GiB; projected"
    # a part that wrote no checkpoint before a resumed one (an old record) is not thrown away
    assert full_table.voided([dict(checkpoints=2), dict(checkpoints=0), dict(checkpoints=1)]) == 0
    assert full_table.voided([dict(checkpoints=0), dict(checkpoints=0), dict(checkpoints=1)]) == 2


def test_an_unfinished_training_says_where_its_pace_so_far_leads():
    """From the checkpoints' times: each part's time to its last checkpoint over the epochs it
    covered (9 epochs in 2,520 s, 18 in 5,310 s: 290 s per epoch), the 73 left at that pace."""
    steps = full.plan(Path("w"), ["avipam"], 2, None)
    first = dict(_part(2530.0, 3900.0, 4.0, MiB, checkpoints=1), exit=130, interrupted="deadline",
                 checkpoint_times=[[2520.0, 9]], sweep_start=0, sweep_end=9, sweeps=100)
    second = dict(_part(5320.0, 8800.0, 4.5, MiB, checkpoints=3), exit=130, interrupted="deadline",
                  checkpoint_times=[[280.0, 10], [3290.0, 20], [5310.0, 27]], sweep_start=9, sweep_end=27, sweeps=100)
    state = dict(steps={"train-avipam": dict(parts=[first, second])})
    row = {r["step"]: r for r in tables(state, steps, ["avipam"], PROJECTION, _info())[0].rows}["train-avipam"]
    assert full_table.checkpoint_pace([first, second]) == 290.0
    assert row["status"] == (
        "in progress: 2 part(s), 2.18 h so far, checkpoint at epoch 27 of 100, peak memory 4.50 GiB; at the pace of "
        "its checkpoints so far (4.8 min per epoch) about 8.06 h in all to epoch 100, before what ends the training; "
        "projected")
    assert row["wall"] == "" and row["wall: measured / projected"] == ""
    # parts without the checkpoints' times (older records), or a checkpoint at the sweep it started from: no pace
    assert full_table.checkpoint_pace([dict(first, checkpoint_times=None),
                                       dict(second, checkpoint_times=[[100.0, 9]])]) is None


# -- the command ---------------------------------------------------------------------------------

def test_stop_after_zero_writes_the_table_of_what_is_measured(tmp_path, capsys):
    from retrieval.ui.cli import main

    work, out = tmp_path / "w", tmp_path / "full.md"
    argv = ["-q", "bench", "full", "--kinds", "lda", "--docs", "1000", "--terms", "3000", "--work", str(work),
            "--stop-after", "0", "--projection", str(PROJECTION), "--write", str(out)]
    assert main(argv) == 0
    text = out.read_text()
    assert "Command: `topicir -q bench full --kinds lda" in text
    assert text.count("| projected |") == 4
    lines = (work / "queries.tsv").read_text().splitlines()
    assert len(lines) == 100 and lines[0].startswith("1\t") and len(lines[0].split("\t")[1].split()) >= 2
    state = json.loads((work / full.STATE).read_text())
    assert state["settings"]["docs"] == 1000 and state["steps"] == {}
    assert [p.name for p in (work / "ap").glob("AP*.gz")] == ["AP880101.gz"]


@pytest.mark.slow
def test_an_interrupted_training_resumes_and_its_parts_add_up(tmp_path):
    """The whole path on 1,000 documents: Ctrl-C once the training has written a checkpoint,
    then the same command again: the training resumes, the table adds both parts."""
    work, out = tmp_path / "w", tmp_path / "full.md"
    argv = [sys.executable, "-m", "retrieval", "-q", "bench", "full", "--kinds", "lda", "--docs", "1000",
            "--terms", "3000", "--iterations", "30", "--runs", "2", "--work", str(work), "--projection",
            str(PROJECTION), "--write", str(out)]
    env = {k: v for k, v in os.environ.items() if k != "TOPICIR_QUICK"}
    env["PYTHONPATH"] = str(ROOT)
    bench = subprocess.Popen(argv, env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             preexec_fn=sigint_as_from_a_terminal)
    state_path, ckpt = work / full.STATE, work / "models" / "lda.npz.ckpt"
    deadline = time.time() + 900
    while time.time() < deadline and bench.poll() is None:
        state = json.loads(state_path.read_text()) if state_path.exists() else {}
        if state.get("running", {}).get("step") == "train-lda" and ckpt.exists():
            break
        time.sleep(0.2)
    assert bench.poll() is None, bench.stdout.read().decode()[-3000:]
    os.killpg(bench.pid, signal.SIGINT)  # Ctrl-C in a terminal: the benchmark and its child
    assert bench.wait(timeout=120) == 130
    state = json.loads(state_path.read_text())
    assert state["steps"]["index"]["done"] and state["steps"]["ql"]["done"]
    first = state["steps"]["train-lda"]
    assert not first.get("done") and len(first["parts"]) == 1 and "running" not in state
    assert first["parts"][0]["interrupted"] == "ctrl-c" and first["parts"][0]["checkpoints"] >= 1
    reached = first["parts"][0]["sweep_end"]
    assert first["parts"][0]["sweep_start"] == 0 and 10 <= reached < 30 and first["parts"][0]["sweeps"] == 30
    # when the checkpoints were seen written (every 10 sweeps, and the stop's), each one's sweep read from it
    sweeps = [sweep for _, sweep in first["parts"][0]["checkpoint_times"]]
    assert sweeps[-1] == reached and sweeps == sorted(set(sweeps))
    assert all(sweep % 10 == 0 for sweep in sweeps[:-1])
    assert ckpt.exists()
    # --stop-after 0: nothing runs, the table says what is measured so far
    so_far = tmp_path / "so-far.md"
    stop = subprocess.run(argv[:-2] + ["--stop-after", "0", "--write", str(so_far)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert stop.returncode == 0, stop.stdout[-3000:] + stop.stderr[-3000:]
    main_table = so_far.read_text().split("## Every part")[0]
    rows = {line.split(" | ")[0][2:]: line for line in main_table.splitlines() if line.startswith("| ")}
    assert "| in progress: 1 part(s), " in rows["train-lda"] and "| projected |" in rows["run-lda"]
    assert f"checkpoint at sweep {reached} of 30" in rows["train-lda"]
    assert "| measured |" in rows["index"] and json.loads(state_path.read_text()) == state

    again = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    state = json.loads(state_path.read_text())
    parts = state["steps"]["train-lda"]["parts"]
    assert len(parts) == 2 and parts[1]["exit"] == 0 and state["steps"]["train-lda"]["done"]
    assert parts[1]["sweep_start"] == reached and parts[1]["sweep_end"] is None
    assert len(state["steps"]["index"]["parts"]) == 1  # measured once, not run again
    assert "resuming from checkpoint" in (work / "logs" / "train-lda.log").read_text()
    assert state["steps"]["run-lda"]["output"]["topics"] == 100 and not ckpt.exists()
    for name in ("ql", "run-lda"):  # each ranking step ran whole twice, each run a part, after a warm-up run
        assert [p["exit"] for p in state["steps"][name]["parts"]] == [0, 0]
        assert (work / "logs" / f"{name}.log").read_text().count("\n$ ") == 3
    for name in ("ql", "run-lda"):  # each batch alone, timed in a process of its own
        batch = state["steps"][name]["batch"]
        assert 0 < batch["batch_s"] < batch["wall_s"] and (work / "logs" / f"{name}-batch.log").exists()
    assert "ql_batch_s" in state["steps"]["run-lda"]["batch"] and "ql_batch_s" not in state["steps"]["ql"]["batch"]
    text = out.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| train-lda |"))
    wall = sum(p["wall_s"] for p in parts)
    assert "measured in 2 parts (resumed)" in row and duration(wall) in row
    row = next(line for line in text.splitlines() if line.startswith("| run-lda |"))
    walls = sorted(p["wall_s"] for p in state["steps"]["run-lda"]["parts"])
    assert f"| measured: median of 2 runs ({duration(walls[0])} to {duration(walls[1])}) |" in row
    assert f"| {duration(sum(walls) / 2)} |" in row
    assert "NOT the default schedule" in text and "no ratios" in text


def test_a_second_benchmark_of_the_same_work_folder_is_refused(tmp_path):
    from models.common.atomic import LockedError, target_lock

    with target_lock(tmp_path / full.STATE, what="bench full state"):
        with pytest.raises(LockedError):
            full.run(kinds=["lda"], docs=1000, terms=3000, work=str(tmp_path), stop_after=0)


class _Measured:
    """A --work folder where every step of the path with LDA is measured once (9 s each; the
    ranking steps' batches timed alone with ``batch``), and the runs, batch timings and warm-ups
    faked and recorded: each run adds a part of the next of ``walls`` seconds."""

    RANKING = dict(topics=100, lines=100_000, bytes=MiB)

    def __init__(self, tmp_path, monkeypatch, walls, batch=False):
        self.work = tmp_path / "w"
        outputs = {"index": dict(n_docs=1000, n_terms=3000, n_tokens=250_000, bytes=MiB), "ql": self.RANKING,
                   "train-lda": dict(bytes=MiB), "run-lda": self.RANKING}
        self.steps = {name: dict(parts=[_part(9.0, 9.0, 1.0, MiB)], done=True, output=out,
                                 **(dict(batch=dict(batch_s=0.5)) if batch else {})) for name, out in outputs.items()}
        self.work.mkdir()
        settings = dict(docs=1000, terms=3000, seed=0, threads=2, iterations=None)
        full.save_state(self.work / full.STATE, dict(format=full.FORMAT, settings=settings, steps=self.steps))
        self.ran, self.timed, self.warmed, self.walls = [], [], [], iter(walls)
        monkeypatch.setattr(full, "_run_step", self._step)
        monkeypatch.setattr(full, "_time_batch", self._batch)
        monkeypatch.setattr(full, "_warm_up", lambda step, work, env: self.warmed.append(step.name))
        monkeypatch.setattr(full, "_prepare", lambda *a: dict(gen_s=0.0, vocab=Vocabulary(["a", "b", "c"], 2, "test")))

    def _step(self, step, state, state_path, work, env, deadline):
        self.ran.append(step.name)
        wall = next(self.walls)
        state["steps"].setdefault(step.name, dict(parts=[]))["parts"].append(_part(wall, 2 * wall, wall / 4, MiB))
        state["steps"][step.name].update(done=True, output=self.RANKING)
        full.save_state(state_path, state)

    def _batch(self, step, state, state_path, work, env):
        self.timed.append(step.name)
        state["steps"][step.name]["batch"] = dict(batch_s=0.5)
        full.save_state(state_path, state)

    def run(self, **options):
        return full.run(kinds=["lda"], docs=1000, terms=3000, work=str(self.work), projection=str(PROJECTION),
                        **options)

    def state(self):
        return json.loads((self.work / full.STATE).read_text())


def test_remeasure_runs_a_measured_ranking_step_again_and_nothing_else(tmp_path, monkeypatch):
    """--remeasure run-lda: the ranking step runs again and its new figures replace the old; the
    steps measured before stay; with --stop-after 0 nothing runs and the old figures stay; a
    training or the index is refused in one line."""
    m = _Measured(tmp_path, monkeypatch, walls=[1.0])
    m.run(runs=1, stop_after=0, remeasure=["run-lda"])
    assert m.ran == m.timed == m.warmed == [] and m.state()["steps"] == m.steps
    m.run(runs=1, remeasure=["run-lda"])
    state = m.state()
    assert m.ran == m.warmed == ["run-lda"] and [p["wall_s"] for p in state["steps"]["run-lda"]["parts"]] == [1.0]
    # the ranking steps measured before their batch was timed alone get it timed, once
    assert m.timed == ["ql", "run-lda"] and state["steps"]["ql"].pop("batch") == dict(batch_s=0.5)
    kept = ("index", "ql", "train-lda")
    assert {k: v for k, v in state["steps"].items() if k != "run-lda"} == {k: m.steps[k] for k in kept}
    m.run(runs=1)  # nothing left to measure
    assert m.ran == ["run-lda"] and m.timed == ["ql", "run-lda"]
    for name in ("train-lda", "index", "run-pam"):
        with pytest.raises(ValueError, match=rf"^--remeasure {name}: only ranking steps are measured again \(ql, "
                                             rf"run-lda with these --kinds\)"):
            m.run(runs=1, remeasure=[name])


def test_a_ranking_step_runs_several_times_and_its_row_is_the_median_run(tmp_path, monkeypatch):
    """--runs 3: a ranking step measured once gets two more runs when the command is run again,
    after one warm-up run that is not measured (a training is not redone); --remeasure replaces
    all three, --stop-after 0 runs none. Its row is the median run's wall and CPU beside the
    largest peak, with the runs' range."""
    m = _Measured(tmp_path, monkeypatch, walls=[5.0, 7.0, 12.0, 6.0, 20.0, 4.0, 8.0], batch=True)
    m.run(runs=3, stop_after=0)
    assert m.ran == m.warmed == []
    main, parts = m.run(runs=3)  # the runs each ranking step lacks, nothing else
    assert m.ran == ["ql", "ql", "run-lda", "run-lda"] and m.timed == []  # their batches were timed alone before
    assert m.warmed == ["ql", "run-lda"]  # once before a step's measured runs
    state = m.state()
    assert [p["wall_s"] for p in state["steps"]["ql"]["parts"]] == [9.0, 5.0, 7.0]
    assert state["steps"]["train-lda"] == m.steps["train-lda"]
    rows = {r["step"]: r for r in main.rows}
    # run-lda: 9, 12 and 6 s: the median run's wall and CPU, the largest peak
    assert rows["run-lda"]["status"] == "measured: median of 3 runs (6.00 s to 12.0 s)"
    assert (rows["run-lda"]["wall"], rows["run-lda"]["CPU (user + sys)"], rows["run-lda"]["peak memory"]) == \
        ("9.00 s", "12.0 s", "3.00 GiB")  # CPU 9, 24 and 12 s: its own median
    assert rows["train-lda"]["status"] == "measured" and rows["train-lda"]["wall"] == "9.00 s"
    assert [(p["step"], p["part"]) for p in parts.rows if p["step"] == "run-lda"] == [("run-lda", n) for n in (1, 2, 3)]
    m.run(runs=3, remeasure=["run-lda"])  # three new runs replace the three
    assert m.ran[4:] == ["run-lda"] * 3 and m.timed == ["run-lda"]
    assert [p["wall_s"] for p in m.state()["steps"]["run-lda"]["parts"]] == [20.0, 4.0, 8.0]
    m.run(runs=3)  # nothing left to run
    assert len(m.ran) == 7 and m.warmed == ["ql", "run-lda", "run-lda"]
    with pytest.raises(ValueError, match=r"^--runs must be >= 1, got 0$"):
        m.run(runs=0)


def test_a_kind_trained_in_epochs_is_said_in_epochs():
    steps = full.plan(Path("w"), ["avipam"], 2, None)
    state = dict(steps={"train-avipam": dict(parts=[dict(_part(600.0, 900.0, 4.0, MiB, checkpoints=1), exit=130,
                                                         interrupted="deadline", sweep_start=0, sweep_end=9,
                                                         sweeps=100)])})
    main, parts = tables(state, steps, ["avipam"], PROJECTION, _info())
    row = {r["step"]: r for r in main.rows}["train-avipam"]
    assert "checkpoint at epoch 9 of 100" in row["status"]
    assert [p["ended"] for p in parts.rows] == ["stopped at a checkpoint (--stop-after) at epoch 9"]
    assert full.plan(Path("w"), ["avipam", "lda"], 2, 3)[2].args[-2:] == ("--epochs", "3")


def test_resuming_a_kind_trained_in_epochs_is_logged_in_epochs(tmp_path, monkeypatch, caplog):
    step = full.plan(tmp_path, ["avipam"], 2, None)[2]
    assert step.name == "train-avipam"
    monkeypatch.setattr(full, "progress", lambda ckpt: (9, 100))
    monkeypatch.setattr(full, "run_measured", lambda *a, **k: dict(_part(60.0, 90.0, 1.0, MiB), exit=130))
    state = dict(steps={})
    with caplog.at_level(logging.INFO, logger=full.log.name):
        full._run_step(step, state, tmp_path / "bench-full.json", tmp_path, {}, None)
    assert f"train-avipam: resuming from {step.checkpoint} (epoch 9)" in caplog.text
    assert state["steps"]["train-avipam"]["parts"][0]["sweep_start"] == 9
