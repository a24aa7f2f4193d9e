"""The doctor's own cost: each phase gives back what it made, a phase that would not fit is not started, an
arm that runs out of memory is not a loss for compile, a busy machine is said, the judgement keeps no
whole output, and the report says what the doctor cost against the workload's own."""

from __future__ import annotations

import copy
import dataclasses
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
import torch

from ctc_doctor import Workload
from ctc_doctor.analyzer.running.calls import run_pass
from ctc_doctor.analyzer.running.numerics import KeptResults
from ctc_doctor.analyzer.running.reference.precision import make_reference
from ctc_doctor.analyzer.running.store import TensorStore
from ctc_doctor.errors import ExitCode
from ctc_doctor.reports.io import load_report
from ctc_doctor.reports.markdown import render_markdown

QUICK = ("--bench-backend", "eager", "--iters", "3", "--warmup", "0")


def test_consecutive_arms_do_not_add_up_and_the_parent_lets_go_of_its_model_first(cli, tmp_path):
    """A 256 MB model and three compiled arms, each on its own copy in the analysing process (supervised: no
    second process builds the model): the process tree's peak during each arm is about the same, not one
    more model each; inference, so the pristine model and every copy share the weights: the fix checks hold
    no second model beside the analysis's; the report and its Markdown say what the doctor cost."""
    out = tmp_path / "r.json"
    result = cli("bench", "cost_targets:big_blocks", *QUICK, "--json", str(out), "-q", timeout=600)
    assert result.returncode == 0, result.stderr
    report = load_report(out)
    cost = report.cost
    model_mb = cost.footprint.model_mb
    assert 250 < model_mb < 270, cost.footprint
    arms = {p.phase: p for p in cost.phases if p.phase.startswith("arm ")}
    peaks = [arms[f"arm {name}"].peak_rss_mb for name in ("compiled", "compiled_fixed", "regional_fixed")]
    assert all(p is not None for p in peaks), arms
    assert max(peaks) - min(peaks) < 0.5 * model_mb, peaks  # a copy left behind would add 256 MB per arm
    phases = {p.phase: p.peak_rss_mb for p in cost.phases}
    assert phases["fix checks"] - phases["capture"] < 0.5 * model_mb, phases  # a copy of its own would add 256 MB
    assert cost.released is None and report.benchmark.isolation.child_processes == 0  # nothing built twice
    # each arm's own high-water mark: one copy at a time
    rows = {a.name: a for a in report.benchmark.arms}
    assert abs(rows["regional_fixed"].peak_memory_mb - rows["compiled"].peak_memory_mb) < 0.5 * model_mb
    assert cost.summary.startswith("the doctor used ") and cost.memory_ratio and cost.time_ratio
    # the workload's time as a fresh process of the user's spends it: its start, imports and build (the arms'
    # child's first start), the compiler's one-time costs, one eager pass and one compile
    b = report.benchmark
    assert b.compiler_warmup_s is not None
    started = cost.workload_wall_s - (b.compiler_warmup_s + rows["eager"].first_pass_s + rows["compiled"].first_pass_s)
    assert 0.5 < started < report.run.duration_s, (started, cost.workload_wall_s)  # this process's start, imports and build
    assert cost.workload_basis.startswith("a process's start, imports and model build (") and "this process's" in cost.workload_basis
    assert "then one eager pass and one compile (eager)" in cost.workload_basis
    assert cost.wall_s > report.run.duration_s - 1.0  # from the CLI's start, the doctor's own imports and build included
    assert "<summary>The doctor's own cost: the doctor used" in render_markdown(report)
    assert "| arm compiled_fixed |" in render_markdown(report)


def test_a_memory_limit_is_kept_by_adapting_and_only_an_analysis_past_it_stops_with_exit_14(cli, tmp_path):
    """--memory-limit 100 on a 256 MB model: for inference every copy shares the weights and the float64
    reference goes block by block or in slices of the batch to stay within 100 MB beyond the workload's
    own, so the fixes are verified (exit 0). Training needs a whole copy of the model from before the
    analysis, 256 MB beyond the workload's own: it is kept in a temporary file (said), the fixes are
    verified alike and the process holds about a model less once the analysis is done; a model no file can keep (it
    holds a lambda) would hold it in memory, so that run stops after the analysis with one line and exit
    14, its findings written."""
    out = tmp_path / "r.json"
    result = cli("fix", "cost_targets:big_blocks", "--no-bisect", "--memory-limit", "100", "--json", str(out), "-q", timeout=300)
    assert result.returncode == 0, result.stderr
    report = load_report(out)
    assert report.fix is not None and report.fix.applied and not report.errors, report.errors
    reference = report.cost.reference
    assert reference is not None and reference.method == "float64_reference", reference
    assert reference.placement == "blockwise" or reference.slices > 1, reference
    assert reference.room_basis == "--memory-limit" and reference.room_mb == 100 and reference.beyond_workload_mb <= 100, reference
    assert reference.not_taken and "would not fit" in reference.not_taken[0]  # the whole cast was tried first

    train = ("--train", "--no-bisect", "--memory-limit", "100", "--json", str(out), "-q")
    result = cli("fix", "cost_targets:big_blocks", *train, timeout=300)
    assert result.returncode == 0, result.stderr
    report = load_report(out)
    assert report.fix is not None and report.fix.applied and not report.errors, report.errors
    kept = "Memory: the copy of the model taken before the analysis (256 MB) was kept in a temporary file"
    assert any(n.startswith(kept) for n in report.notes), report.notes
    spilled = next(p for p in report.cost.phases if p.phase == "report")  # after the analysis, before any copy

    result = cli("fix", "cost_targets:big_blocks_unpicklable", *train, timeout=300)
    assert result.returncode == ExitCode.NO_MEMORY, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("ctc-doctor: error: the analysis itself holds about 256 MB on cpu beyond"), lines
    assert "--memory-limit allows 100 MB: stopped after it" in lines[0] and "partial report written" in lines[0]
    report = load_report(out)  # what was found before it stands
    assert report.graph_breaks and report.fix is None and report.errors[-1].phase == "preflight"
    in_memory = next(p for p in report.cost.phases if p.phase == "report")
    assert in_memory.peak_rss_mb - spilled.peak_rss_mb > 0.7 * 256, (in_memory, spilled)


def test_an_arm_that_runs_out_of_memory_is_named_and_is_not_a_loss_for_compile(cli, tmp_path):
    """The compiled code of this model builds a 4 GB scratch tensor; the arms' child is capped at 1.5 GB: the
    compiled arm runs out of memory, eager does not, and the verdict says compile could not be measured."""
    out = tmp_path / "r.json"
    args = ("bench", "cost_targets:allocates_under_compile", *QUICK, "--arm-memory-limit", "1536", "--json", str(out))
    result = cli(*args, timeout=300)
    assert result.returncode == 0, result.stderr
    b = load_report(out).benchmark
    arms = {a.name: a for a in b.arms}
    assert arms["eager"].error is None and arms["eager"].latency_ms is not None
    assert arms["compiled"].out_of_memory and arms["compiled"].peak_memory_mb, arms["compiled"]
    assert b.best_arm is None and b.best_arm_reason.startswith("the compiled arms could not be measured (compiled: out of memory, peak ")
    assert "best: eager" not in result.stdout and "could not be measured" in result.stdout


def test_under_a_memory_limit_an_arm_that_needs_more_than_the_workload_runs_out_of_memory_within_it(cli, tmp_path):
    """--memory-limit 300: the regional arm's blocks each run with a 2 GB scratch buffer; eager and compiled
    (the workload itself) run as they are, the regional arm may hold their peak plus 300 MB and runs out of
    memory within that, named in its row; the run finishes, and the process never held the 2 GB."""
    out = tmp_path / "r.json"
    args = ("bench", "user_targets:crashes_by_arm", "--bench-backend", "ctc_test_regional_allocates", "--iters", "2", "--warmup", "0")
    result = cli(*args, "--no-fix", "--memory-limit", "300", "--json", str(out), "-q", timeout=300)
    assert result.returncode == 0, result.stderr
    b = load_report(out).benchmark
    arms = {a.name: a for a in b.arms}
    assert arms["eager"].memory_cap is None and arms["compiled"].memory_cap is None
    assert arms["eager"].latency_ms is not None and arms["compiled"].latency_ms is not None
    regional = arms["regional"]
    assert regional.out_of_memory and regional.latency_ms is None, regional
    assert regional.memory_cap.endswith("+ --memory-limit 300 MB)") and regional.error.startswith("out of memory within its cap (")
    own = max(arms["eager"].peak_memory_mb, arms["compiled"].peak_memory_mb)
    assert regional.peak_memory_mb < own + 300 + 64, (regional.peak_memory_mb, own)  # never near the 2 GB
    assert b.best_arm != "regional" and "regional" not in b.within_noise


def test_a_memory_limit_gives_up_in_advance_the_arms_it_cannot_afford(cli, tmp_path):
    """--memory-limit 100 on the 256 MB model with --aot: the AOT arms would each load their own set of the
    weights (256 MB beyond the workload's own). They are given up before any arm starts, each with its
    line, and never compiled; eager and compiled (the workload itself) and the arms that share the weights
    run."""
    out = tmp_path / "r.json"
    args = ("bench", "cost_targets:big_blocks", *QUICK, "--aot", "--no-fix", "--memory-limit", "100", "--json", str(out), "-q")
    result = cli(*args, timeout=300)
    assert result.returncode == 0, result.stderr
    b = load_report(out).benchmark
    names = {a.name for a in b.arms}
    assert {"eager", "compiled", "regional"} <= names and not names & {"aot", "aot_regional"}, names
    given_up = [n for n in b.notes if "left out before it ran" in n]
    assert len(given_up) == 2 and all(n.split(":")[0] in ("aot", "aot_regional") for n in given_up), b.notes
    assert all("it needs about 256 MB beyond the workload's own (its own set of the weights" in n for n in given_up), given_up
    assert all(n.endswith("--memory-limit allows 100 MB.") for n in given_up)
    assert all(a.latency_ms is not None and not a.out_of_memory for a in b.arms), [(a.name, a.error) for a in b.arms]


@pytest.fixture
def two_busy_loops():
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    yield
    for p in loops:
        p.kill()
        p.wait()


def test_under_two_busy_loops_the_report_and_the_terminal_say_the_machine_was_busy(cli, tmp_path, two_busy_loops):
    out = tmp_path / "r.json"
    result = cli("bench", "cost_targets:small", "--bench-backend", "eager", "--arms", "regional", "--json", str(out), timeout=300)
    assert result.returncode == 0, result.stderr
    b = load_report(out).benchmark
    assert b.machine is not None and b.machine.busy and b.machine.other_cpu >= 1.0, b.machine
    assert b.machine.note.startswith("busy machine: other processes used up to ")
    assert any(a.busy and a.busy >= 1.0 for a in b.arms)
    # an arm timed while other processes held a core says so (the load each arm saw is its own sample)
    timed_busy = [a for a in b.arms if a.latency_ms and a.busy is not None and a.busy >= 1.0]
    assert timed_busy and all("other processes used" in (a.latency_ms.unstable or "") for a in timed_busy)
    assert "the machine was busy while timing" in b.best_arm_reason
    assert "busy machine" in result.stdout and "unstable" in result.stdout


def _mlp() -> Workload:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 512), torch.nn.Tanh(), torch.nn.Linear(512, 64)).eval()
    return Workload(model, args=(torch.randn(256, 64),), variants=[(torch.randn(128, 64),)])


def test_eager_results_past_the_memory_limit_go_to_a_file_and_judge_the_same():
    """The same judgement with eager's results and the reference's differences in memory and in a file."""
    checks = []
    for limit in (1 << 30, 0):
        w = _mlp()
        kept = KeptResults(TensorStore(limit=limit))
        with torch.no_grad():
            run_pass(w.model, w, w.calls(), seed=0, train=False, sink=kept)
        reference = make_reference(w.model, w, w.calls(), kept, seed=0, train=False, device="cpu", loose=True)
        assert reference.method == "float64_reference"
        assert (reference.kept_bytes()[1] > 0) == (limit == 0), reference.kept_bytes()
        compiled = torch.compile(w.model, backend="aot_eager")
        judgement = reference.judgement()
        with torch.no_grad():
            run_pass(compiled, w, w.calls(), seed=0, train=False, sink=judgement)
        checks.append(judgement.result())
        reference.close()
    memory, disk = checks
    assert memory.ok and disk.ok and memory.ratio == disk.ratio and memory.worst == disk.worst


@pytest.mark.fast
def test_the_reference_block_by_block_gives_the_verdict_of_the_whole_float64_model():
    """Each module cast to float64 only while its forward runs (a model too big for a float64 copy) judges
    as the whole model cast does; the model comes back bit for bit."""
    w = _mlp()
    before = {k: v.clone() for k, v in w.model.state_dict().items()}
    results = {}
    for placement in ("whole", "blockwise"):
        kept = KeptResults()
        with torch.no_grad():
            run_pass(w.model, w, w.calls(), seed=0, train=False, sink=kept)
        reference = make_reference(w.model, w, w.calls(), kept, seed=0, train=False, device="cpu", loose=True, placements=(placement,))
        assert reference.placement == placement and reference.method == "float64_reference", reference.note
        wrong = _mlp()
        with torch.no_grad():
            wrong.model[0].weight.mul_(1.02)  # a 2 % error, as a compile bug would make
        results[placement] = (reference.judge(_sample(w.model, w)), reference.judge(_sample(wrong.model, w)))
    assert all(right.ok and not bad.ok for right, bad in results.values()), results
    assert results["whole"][0].eager_error == pytest.approx(results["blockwise"][0].eager_error, rel=1e-6)
    assert all(torch.equal(before[k], v) and v.dtype == torch.float32 for k, v in w.model.state_dict().items())


def _sample(model, workload):
    with torch.no_grad():
        return run_pass(model, workload, workload.calls(), seed=0, train=False, collect=True)


def test_a_budget_leaves_out_the_optional_arms_and_names_them(cli, tmp_path):
    out = tmp_path / "r.json"
    args = ("bench", "ctc_doctor.fixtures.zoo:repeated_blocks", *QUICK, "--budget", "0.5", "--json", str(out), "-q")
    result = cli(*args, timeout=300)
    assert result.returncode == 0, result.stderr
    report = load_report(out)
    b = report.benchmark
    assert [a.name for a in b.arms] == ["eager", "compiled"]  # always measured
    # the fix checks did not fit, so no fix was applied, and the regional arm did not fit either
    assert any(n.startswith("--budget/--timeout: no time left to verify S1") for n in report.fix.notes), report.fix.notes
    assert any(n.startswith("--budget: regional not measured (a compiled arm took about ") for n in b.notes), b.notes


def test_the_run_does_not_outlive_a_command_stopped_by_sigkill(tmp_path):
    """A job's timeout kills ctc-doctor: the run it supervises (its own process group) must not run on,
    holding memory."""
    import signal
    import time

    from ctc_doctor.analyzer.running.memory import descendants

    from .conftest import REPO, TARGETS

    env = {**os.environ, "PYTHONPATH": str(TARGETS)}
    args = [sys.executable, "-m", "ctc_doctor", "bench", "cost_targets:small", "--bench-backend", "eager", "-q"]
    parent = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    children: list[int] = []
    while time.monotonic() < deadline and not children:
        children = [p for p in descendants(parent.pid) if "ctc_doctor" in _cmdline(p)]
        time.sleep(0.2)
    assert children, "the supervised run never started"
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    gone = time.monotonic() + 20
    while time.monotonic() < gone and any(_alive(p) for p in children):
        time.sleep(0.2)
    assert not any(_alive(p) for p in children), [_cmdline(p) for p in children]


def _run_sampled(args: list[str], sample: Callable[[Any, int], None]) -> subprocess.Popen[str]:
    """`python -m ctc_doctor ARGS --progress-fd FD` from the repository root, with the test targets
    importable; `sample(step, pid)` every 20 ms with the step of its latest progress event, until it exits."""
    import time

    from ctc_doctor.progress import ProgressEvent, Step

    from .conftest import REPO, TARGETS

    read, write = os.pipe()
    os.set_blocking(read, False)
    env = {**os.environ, "PYTHONPATH": str(TARGETS)}
    argv = [sys.executable, "-m", "ctc_doctor", *args, "--progress-fd", str(write)]
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, pass_fds=(write,))
    os.close(write)
    step, buffer = Step.LOAD, b""
    while proc.poll() is None:
        try:
            buffer += os.read(read, 65536)
        except BlockingIOError:
            pass
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            event = ProgressEvent.parse(line.decode())
            if event is not None:
                step = event.step
        sample(step, proc.pid)
        time.sleep(0.02)
    os.close(read)
    return proc


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_run_stopped_by_a_signal_writes_its_report_with_the_arms_measured_before(tmp_path, sig):
    """A job's time limit sends SIGTERM (Ctrl-C sends SIGINT) while an arm after eager runs: the report
    is still written, with the analysis, the fix checks and the eager arm measured before the signal,
    and the run ends with one line and exit 130."""
    import signal
    import time

    from ctc_doctor.progress import ProgressEvent, Step

    from .conftest import REPO, TARGETS, ctrl_c_reaches_the_child

    out = tmp_path / "r.json"
    read, write = os.pipe()
    env = {**os.environ, "PYTHONPATH": str(TARGETS)}
    args = [sys.executable, "-m", "ctc_doctor", "cost_targets:big_blocks", "--no-bisect", *QUICK]
    args += ["--json", str(out), "--progress-fd", str(write)]
    parent = subprocess.Popen(
        args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        pass_fds=(write,), preexec_fn=ctrl_c_reaches_the_child,
    )  # fmt: skip
    os.close(write)
    seen: list[str] = []
    with os.fdopen(read, encoding="utf-8") as events:
        for line in events:
            event = ProgressEvent.parse(line)
            if event is not None:
                seen.append(event.label)
                if event.step is Step.ARM and event.subject == "compiled":  # the eager arm is measured: stop the run now
                    parent.send_signal(getattr(signal, sig))
                    break
    t0 = time.monotonic()
    stdout, stderr = parent.communicate(timeout=120)
    assert time.monotonic() - t0 < 60, "the run did not stop soon after the signal"
    assert parent.returncode == ExitCode.INTERRUPTED, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines[-1].startswith(f"ctc-doctor: error: stopped by {sig} during bench"), lines
    assert lines[-1].endswith(f"partial report written to {out}"), lines
    report = load_report(out)
    assert report.errors[-1].phase == "interrupted" and report.errors[-1].type == sig
    assert report.graph_breaks and report.fix is not None and report.fix.applied  # what came before stands
    arms = [a.name for a in report.benchmark.arms]
    assert arms and arms[0] == "eager" and report.benchmark.arms[0].latency_ms is not None, arms
    assert any("arms measured before it: eager" in n for n in report.benchmark.notes), report.benchmark.notes
    assert report.cost is not None and report.cost.phases  # the doctor's own account of what it did
    assert "B1" in stdout  # the summary of what was found is printed too


@pytest.mark.parametrize("limit", [None, "200"])
def test_the_early_bisection_child_builds_no_second_model_while_the_analysis_runs(tmp_path, limit):
    """The trials' child starts before the analysis so that its imports overlap it, but it builds the model
    only when the bisection asks for it, once the preflight said a second model fits: during the analysis
    it holds no copy of the 256 MB model (measured on the process tree), during the bisection it does.
    With --memory-limit 200 (MB) a second model does not fit: the trials run in this process, and the
    child, idle, is gone before they start."""
    from ctc_doctor.analyzer.running.memory import descendants, rss_bytes
    from ctc_doctor.progress import Step

    out = tmp_path / "r.json"
    args = ["cost_targets:big_blocks", "--no-fix", *QUICK, "-q", "--json", str(out), *(["--memory-limit", limit] if limit else [])]
    child_mb: dict[str, float] = {"analysis": 0.0, "bisection": 0.0}

    def sample(step: Step, parent: int) -> None:
        analysis = (Step.LOAD, Step.COMPILE, Step.EAGER, Step.EXPLAIN)
        stage = "bisection" if step is Step.BISECT else "analysis" if step in analysis else None
        trials = [p for p in descendants(parent) if "workers.trial" in _cmdline(p)]
        if stage is not None and trials:
            child_mb[stage] = max(child_mb[stage], sum((rss_bytes(p) or 0) for p in trials) / 2**20)

    parent = _run_sampled(args, sample)
    assert parent.returncode == 0, parent.stderr.read() if parent.stderr else ""
    report = load_report(out)
    if limit:
        assert report.bisect is not None and not report.bisect.isolated and report.bisect.trials, report.bisect
        assert any("the trials ran in this process instead" in n for n in report.notes), report.notes
        assert child_mb["analysis"] > 0 and child_mb["bisection"] == 0, child_mb  # started early, gone before the trials
        return
    assert report.bisect is not None and report.bisect.isolated and report.bisect.child_processes >= 1
    model_mb = report.cost.footprint.model_mb
    assert child_mb["analysis"] > 0 and child_mb["bisection"] > 0, child_mb  # both stages were sampled
    # the child's model (256 MB) appears with the bisection, not before
    assert child_mb["bisection"] - child_mb["analysis"] > 0.7 * model_mb, child_mb


ALONE = """
import torch
from cost_targets import logits_heavy
w = logits_heavy()
with torch.no_grad():
    for fn in (w.model, torch.compile(w.model, backend="eager")):
        for c in w.calls():
            fn(*c.args, **c.kwargs)
"""


def _tree_peak_mb(args: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Run a command; the peak resident memory of its process tree, sampled every 20 ms, as held over two
    samples in a row: a child caught between fork and exec shows its parent's pages once more for an
    instant (a resident-set sum counts shared pages twice), which is no memory the run holds."""
    import time

    from ctc_doctor.analyzer.running.memory import tree_rss_bytes

    from .conftest import REPO

    proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = previous = 0
    while proc.poll() is None:
        now = tree_rss_bytes(proc.pid) or 0
        peak = max(peak, min(now, previous))
        previous = now
        time.sleep(0.02)
    out, err = proc.communicate()
    return peak / 2**20, subprocess.CompletedProcess(args, proc.returncode, out, err)


@pytest.mark.transformers
def test_with_a_memory_limit_of_a_third_of_the_workloads_peak_the_bench_fits_beside_it_and_judges_in_float64(tmp_path):
    """The CPU stand-in for "fits beside the model on a GPU": the workload alone (eager, then one compile) is
    measured, then `bench --memory-limit` at 0.3x its peak. The run completes (exit 0) with a float64 verdict
    (the reference block by block or in slices of the batch, within the limit), and the process tree's peak
    stays within 1.5x the workload's own."""
    from .conftest import TARGETS

    env = {**os.environ, "PYTHONPATH": str(TARGETS)}
    alone_mb, alone = _tree_peak_mb([sys.executable, "-c", ALONE], env)
    assert alone.returncode == 0, alone.stderr
    limit = int(0.3 * alone_mb)
    out = tmp_path / "r.json"
    args = ["bench", "cost_targets:logits_heavy", *QUICK, "--memory-limit", str(limit), "--json", str(out), "-q"]
    doctor_mb, result = _tree_peak_mb([sys.executable, "-m", "ctc_doctor", *args], env)
    assert result.returncode == 0, result.stderr
    report = load_report(out)
    reference = report.cost.reference
    assert reference.method == "float64_reference" and (reference.placement != "whole" or reference.slices > 1), reference
    assert reference.beyond_workload_mb <= limit and reference.room_basis == "--memory-limit" and reference.room_mb == limit, reference
    arms = {a.name: a for a in report.benchmark.arms}
    assert arms["compiled"].numerics.method == "float64_reference" and arms["compiled"].numerics_ok
    # the arms ran in the analysing process, supervised: no second torch beside it, a crash still costs its arm
    isolation = report.benchmark.isolation
    assert isolation.isolated and isolation.child_processes == 0 and isolation.reason.startswith("the arms ran in the analysing process")
    phases = [(p.phase, p.peak_rss_mb) for p in report.cost.phases]
    assert doctor_mb <= 1.5 * alone_mb, (doctor_mb, alone_mb, phases, report.cost.notes)


def test_one_torch_at_a_time_the_command_supervises_the_run_without_a_model_of_its_own(tmp_path):
    """The command's own process starts the run and waits: it imports no torch and builds no model (its own
    resident memory stays under 100 MB, where torch alone is about 250 MB), and no second process holds the
    256 MB model while the run's arms are measured: the process tree's two Pythons are the command and the
    run (inductor's compile workers aside)."""
    import time

    from ctc_doctor.analyzer.running.memory import descendants, rss_bytes

    from .conftest import REPO, TARGETS

    env = {**os.environ, "PYTHONPATH": str(TARGETS)}
    out = tmp_path / "r.json"
    args = [sys.executable, "-m", "ctc_doctor", "bench", "cost_targets:big_blocks", "--no-fix", *QUICK, "-q", "--json", str(out)]
    parent = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    own, samples, seen = 0, 0, {}  # pid -> samples in which it ran as ctc_doctor
    while parent.poll() is None:
        own = max(own, rss_bytes(parent.pid) or 0)
        for pid in descendants(parent.pid):
            cmdline = _cmdline(pid)
            if "-m ctc_doctor" in cmdline:
                seen.setdefault(pid, []).append(cmdline)
        samples += 1
        time.sleep(0.02)
    assert parent.returncode == 0, parent.stderr.read() if parent.stderr else ""
    report = load_report(out)
    assert samples > 10 and report.benchmark.isolation.reason.startswith("the arms ran in the analysing process")
    # a child the run starts (inductor's compile workers, a probe) shows the run's own command line for the
    # moment between its fork and its exec: a Python of ours is one seen in more than one sample
    runs = {pid: lines[-1] for pid, lines in seen.items() if len(lines) > 1}
    assert 0 < own < 100 * 2**20 and len(runs) == 1, (own / 2**20, runs, {pid: len(v) for pid, v in seen.items()})


@pytest.mark.fast
def test_a_training_reference_that_fits_no_room_runs_no_way_past_the_doctors_margin_nor_past_a_limit():
    """The doctor's margin is a bound for training as --memory-limit is (one module's parameters at float64
    at a time fits nearly any margin): in a room nothing fits, no way runs past it and a float32 model is
    judged elementwise, each way named as not fitting; the model comes back as it was."""
    from ctc_doctor.analyzer.running.reference.precision import Room

    for basis in ("the doctor's margin, a test's", "--memory-limit"):
        w = _mlp()
        w.model.train()
        before = {k: v.clone() for k, v in w.model.state_dict().items()}
        kept = KeptResults()
        run_pass(w.model, w, w.calls(), seed=0, train=True, sink=kept)
        grads = {n: p.grad.clone() for n, p in w.model.named_parameters()}
        room = Room(1, activations=0, basis=basis)
        ref = make_reference(w.model, w, w.calls(), kept, seed=0, train=True, device="cpu", loose=True, room=room)
        # put back as it was: values, dtypes and the gradients eager's run left
        assert all(torch.equal(before[k], v) and v.dtype == torch.float32 for k, v in w.model.state_dict().items())
        assert all(torch.equal(p.grad, grads[n]) for n, p in w.model.named_parameters())
        assert ref.method == "elementwise" and "would not fit" in ref.note and "first that fits what is free" not in ref.note, ref.note
        assert ref.run is not None and {t.split(" would")[0].split(" run ")[1].split(" (")[0] for t in ref.run.not_taken} >= {
            "the model cast on its device",
            "one module's parameters at a time",
        }, ref.run.not_taken


@pytest.mark.fast
def test_the_compilers_one_time_costs_are_paid_once_a_process_and_counted_where_first_paid():
    """The fix phase's compile on the user's backend pays the compiler's one-time costs before the
    benchmark's warm-up: the warm-up then compiles nothing and hands back the figure paid first (a second
    measurement would differ), so the workload's side still counts what a fresh process pays once."""
    from ctc_doctor.analyzer.running.device import warm_compiler

    first = warm_compiler("cpu", "aot_eager")
    assert first > 0 and warm_compiler("cpu", "aot_eager") == first
    assert warm_compiler("cpu", "aot_eager", "default") == first  # the same backend: its costs are paid


@pytest.mark.fast
def test_the_doctors_default_margin_bounds_an_inference_reference():
    """The default margin (`Room.beside` the workload's footprint, not --memory-limit) is a bound for
    inference: in a margin that holds one Linear at float64 but not the whole model, the reference runs
    module by module within it; in a margin nothing fits, no way past it is taken and the judgement is
    elementwise, said so (the training test above: so for training)."""
    from ctc_doctor.analyzer.running.reference.precision import Room
    from ctc_doctor.reports import models as rm

    margin = Room.beside(rm.Footprint(model_mb=0.3, activations_mb=0.0, output_mb=0.0, method="test"))
    assert margin.basis.startswith("the doctor's margin") and margin.extra == 256 * 2**20
    # at float64 the whole model adds 264 KB (66k parameters x 4 more bytes), its larger Linear 132 KB
    results = {}
    for extra in (200 * 2**10, 1):
        w = _mlp()
        kept = KeptResults()
        run_pass(w.model, w, w.calls(), seed=0, train=False, sink=kept)
        room = dataclasses.replace(margin, extra=extra, activations=0)
        results[extra] = make_reference(w.model, w, w.calls(), kept, seed=0, train=False, device="cpu", loose=False, room=room)
    within, none = results[200 * 2**10], results[1]
    assert within.method == "float64_reference" and within.placement == "blockwise", within.note
    assert within.run.beyond_workload_mb <= 200 / 1024 and "no way fit" not in (within.note or "")
    assert none.method == "elementwise" and "would not fit" in none.note and "first that fits what is free" not in none.note


@pytest.mark.fast
def test_progress_is_typed_and_every_step_has_a_cost_phase_read_from_its_fields_not_its_label():
    """Each step of the run is a cost phase (the load and a script are not the doctor's own work), an arm's
    its own; the cost meter and the screens read the event's fields, and a renamed label changes nothing;
    an event crosses a process as one JSON line and comes back equal."""
    from ctc_doctor.analyzer.resources.meter import COST_PHASES, phase_of
    from ctc_doctor.progress import ProgressEvent, Step

    assert set(COST_PHASES) | {Step.ARM, Step.LOAD, Step.SCRIPT} == set(Step)
    arm = ProgressEvent(Step.ARM, 3, 8, subject="compiled_fixed", activity="timing", timing=True)
    assert phase_of(arm) == "arm compiled_fixed" and arm.label == "bench compiled_fixed: timing"
    assert phase_of(ProgressEvent(Step.FIX, subject="S3")) == "fix checks" and ProgressEvent(Step.FIX, subject="S3").label == "fix S3"
    assert phase_of(ProgressEvent(Step.FIX_REFERENCE)) == "fix reference" and phase_of(ProgressEvent(Step.LOAD)) is None
    assert ProgressEvent.parse(arm.line()) == arm and ProgressEvent.of(arm.fields()) == arm
    assert ProgressEvent.parse("not json") is None and ProgressEvent.parse('{"phase": "bisect x"}') is None


class _Counting(torch.nn.Module):
    """A block whose output depends on how often it ran: recomputing it in the backward gives other values."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(32, 32)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return torch.tanh(self.proj(x)) * (1 + 0.1 * self.calls)


def _blocks_train(counting: bool = False) -> Workload:
    torch.manual_seed(0)
    if counting:
        model = torch.nn.Sequential(*[_Counting() for _ in range(3)])
    else:
        nn = torch.nn
        model = nn.Sequential(*[nn.Sequential(nn.Linear(32, 128), nn.GELU(), nn.Dropout(0.2), nn.Linear(128, 32)) for _ in range(4)])
    return Workload(model.train(), args=(torch.randn(64, 32),), variants=[(torch.randn(48, 32),)])


def _train_reference(w: Workload, **kwargs):
    kept = KeptResults()
    run_pass(w.model, w, w.calls(), seed=0, train=True, sink=kept)
    return kept, make_reference(w.model, w, w.calls(), kept, seed=0, train=True, device="cpu", loose=True, **kwargs)


@pytest.mark.fast
def test_a_training_reference_block_by_block_gives_the_whole_models_gradients_and_is_taken_when_whole_would_not_fit():
    """Training's float64 reference with each block's activations recomputed in the backward (dropout
    drawing the same numbers again), or with what the backward needs saved on the host, gives the whole
    cast model's outputs, losses and gradients to the bit; it is the way taken when the whole run would pass
    the room and it fits; the model comes back bit for bit, its blocks' forward as it was."""
    from ctc_doctor.analyzer.running.reference.precision import Plan, Room, Way, _DeltaRecorder, _run_in, _ways

    w = _blocks_train()
    before = {k: v.clone() for k, v in w.model.state_dict().items()}
    kept, whole = _train_reference(w, placements=("whole",))
    _, blocks = _train_reference(w, placements=("checkpointed",))
    assert whole.placement == "whole" and blocks.placement == "checkpointed" and blocks.method == "float64_reference", blocks.note
    recorder = _DeltaRecorder(kept, kept.store)
    _run_in(Way(torch.float64, "offloaded"), w.model, w, w.calls(), recorder, seed=0, train=True, steps=False)
    assert whole.deltas and any(n.startswith("grad ") for n in whole.deltas) and any(n.startswith("loss ") for n in whole.deltas)
    for other in (blocks.deltas, recorder.deltas):
        assert other is not None and other.keys() == whole.deltas.keys()
        for name, d in whole.deltas.items():
            assert torch.equal(d.chunk(0, d.numel, "cpu"), other[name].chunk(0, d.numel, "cpu")), name
    assert all(torch.equal(before[k], v) for k, v in w.model.state_dict().items())
    assert not any("forward" in m.__dict__ for m in w.model.modules())

    # a room between the two: the whole run does not fit it, block by block does
    work = 8 * 2**20
    taken = {way.placement: way.device for way in _ways(torch.float64, Plan(w.model, work, "cpu", True))}
    room = Room((taken["whole"] + taken["checkpointed"]) // 2 - work, activations=work, basis="a test's room")
    _, fitted = _train_reference(w, room=room)
    assert fitted.placement == "checkpointed" and fitted.run is not None, fitted.note
    assert fitted.run.not_taken[0].startswith("a float64 run the model cast on its device would not fit"), fitted.run.not_taken
    assert "block by block" in (fitted.note or "") and "would not fit" in (fitted.note or ""), fitted.note


@pytest.mark.fast
def test_a_block_that_recomputes_otherwise_is_not_checkpointed_and_the_reference_says_why():
    """A block whose output depends on its call count would give the backward another computation's
    gradients once recomputed: the checkpointed way fails on it (not silently), and the next way runs."""
    w = _blocks_train(counting=True)
    _, only = _train_reference(w, placements=("checkpointed",))
    assert only.method == "elementwise" and "recomputed in the backward gives other values" in (only.note or ""), only.note
    assert "RecomputedOtherwise: 2 (_Counting)" in (only.note or ""), only.note  # the backward reaches the last block first
    _, fallback = _train_reference(_blocks_train(counting=True), placements=("checkpointed", "whole"))
    assert fallback.placement == "whole" and fallback.method == "float64_reference", fallback.note


def test_with_an_arms_child_the_analysing_process_gives_its_model_back_before_the_child_builds_its_own(tmp_path):
    """--arm-memory-limit runs the arms in a child process that rebuilds the 256 MB model: the analysing
    process lets go of its model and pristine copy first (the report says how much), so the two never hold
    it at once: measured on the processes, the analysing one holds about a model less while the child runs."""

    from ctc_doctor.analyzer.running.memory import descendants, rss_bytes
    from ctc_doctor.progress import Step

    out = tmp_path / "r.json"
    args = ["bench", "cost_targets:big_blocks", "--no-fix", *QUICK, "-q", "--arm-memory-limit", "4096", "--json", str(out)]
    mb: dict[str, float] = {"analysis": 0.0, "arms": 0.0, "child": 0.0}

    def sample(step: Step, root: int) -> None:
        tree = [root, *descendants(root)]
        workers = [p for p in tree if "workers.bench" in _cmdline(p)]
        analysing = max((p for p in tree if "cost_targets:big_blocks" in _cmdline(p)), key=lambda p: rss_bytes(p) or 0, default=None)
        own = (rss_bytes(analysing) or 0) / 2**20 if analysing else 0.0
        if step in (Step.EAGER, Step.REPORT):
            mb["analysis"] = max(mb["analysis"], own)
        elif step is Step.ARM and workers:
            mb["arms"] = max(mb["arms"], own)
            mb["child"] = max(mb["child"], sum(rss_bytes(p) or 0 for p in workers) / 2**20)

    root = _run_sampled(args, sample)
    assert root.returncode == 0, root.stderr.read() if root.stderr else ""
    report = load_report(out)
    assert report.benchmark.isolation.isolated and report.benchmark.isolation.child_processes >= 1
    released = report.cost.released or ""
    assert "its pristine copy before the arms' child rebuilt the model (256 MB)" in released, released
    assert mb["analysis"] > 0 and mb["arms"] > 0 and mb["child"] > 256, mb
    assert mb["analysis"] - mb["arms"] > 0.7 * 256, mb  # the analysing process gave the model back


@pytest.mark.fast
def test_a_model_copy_kept_on_disk_is_removed_by_its_run_whatever_ended_the_stage():
    """The supervisor removes what its stage kept on disk (a stage killed in an arm cannot), by the run's
    name, and nothing of another run's; the folders are on disk (a tmpfs is memory, skipped)."""
    from ctc_doctor.processes import SPILL_PREFIX, remove_spilled, spill_dirs

    folders = spill_dirs()
    assert folders and all(os.path.isdir(f) for f in folders)
    ours = os.path.join(folders[0], f"{SPILL_PREFIX}ctc-doctor-run-test{os.getpid()}-x.pt")
    other = os.path.join(folders[0], f"{SPILL_PREFIX}ctc-doctor-run-other{os.getpid()}-x.pt")
    for path in (ours, other):
        with open(path, "wb") as fh:
            fh.write(b"0")
    try:
        remove_spilled(f"ctc-doctor-run-test{os.getpid()}")
        assert not os.path.exists(ours) and os.path.exists(other)
    finally:
        for path in (ours, other):
            if os.path.exists(path):
                os.unlink(path)


def test_under_busy_loops_no_verdict_rests_on_a_timing_and_the_counts_decide(cli, tmp_path, two_busy_loops):
    """Other processes on the cores while the arms are timed (torch's threads wait on a descheduled peer:
    270x slower on a 2-core box): no latency or compile-time delta of a busy arm judges a fix either way;
    the verdict rests on the fix check's counts and says its timings were not measured."""
    out = tmp_path / "r.json"
    target = "ctc_doctor.fixtures.zoo:print_in_forward"
    result = cli("bench", target, "--bench-backend", "eager", "--iters", "3", "--warmup", "0", "--json", str(out), timeout=300)
    assert result.returncode == 0, result.stderr
    report = load_report(out)
    busy_arms = {a.name for a in report.benchmark.arms if a.latency_ms and "other processes used" in (a.latency_ms.unstable or "")}
    if not busy_arms:
        pytest.skip("the loops did not compete with torch's threads here (more cores than threads)")
    judged = [s for s in report.suggestions if s.deltas]
    timed = [d for s in judged for d in s.deltas if d.metric in ("latency_ms", "cold_compile_s", "warm_compile_s") and d.unstable]
    assert timed and all(d.better is None and "not measured: busy machine" in d.unstable for d in timed), timed
    fixed = [s for s in judged if any(d.unstable for d in s.deltas)]
    assert fixed and all(s.verdict == "recommended" and "timings not measured: busy machine" in s.verdict_reason for s in fixed), [
        (s.id, s.verdict, s.verdict_reason) for s in fixed
    ]


@pytest.mark.fast
def test_the_training_reference_counts_the_optimizers_own_state_and_a_copy_dropped_after_is_not_put_back():
    """The reference's plan counts what the workload's optimizer keeps per parameter (SGD none, momentum
    one, Adam two), not Adam's always; on the benchmark's eager copy, which is dropped after, it keeps no
    copy of the model's values to put back, and its differences are the same to the bit."""
    from ctc_doctor.analyzer.running.reference.precision import Plan, _optimizer_moments, _ways

    w = _blocks_train()
    for factory, moments in ((lambda p: torch.optim.SGD(p, lr=0.1), 0), (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), 1),
                             (lambda p: torch.optim.AdamW(p), 2), (None, 0)):  # fmt: skip
        assert _optimizer_moments(dataclasses.replace(w, optimizer=factory)) == moments
    kept_way = {way.placement: way.device for way in _ways(torch.float64, Plan(w.model, 0, "cpu", True, disposable=False))}
    dropped = {way.placement: way.device for way in _ways(torch.float64, Plan(w.model, 0, "cpu", True, disposable=True))}
    size = sum(p.numel() * p.element_size() for p in w.model.parameters())
    assert kept_way["whole"] - dropped["whole"] == size  # the model's own values, kept on the host to put back

    w = dataclasses.replace(_blocks_train(), optimizer=lambda p: torch.optim.SGD(p, lr=0.1))
    results = []
    for disposable in (False, True):
        model = copy.deepcopy(w.model)
        one = dataclasses.replace(w, model=model)
        kept = KeptResults()
        run_pass(model, one, one.calls(), seed=0, train=True, sink=kept, optimizer=one.optimizer(model.parameters()))
        results.append(
            make_reference(model, one, one.calls(), kept, seed=0, train=True, device="cpu", loose=True, steps=True, disposable=disposable)
        )
        assert all(p.dtype == (torch.float64 if disposable else torch.float32) for p in model.parameters())  # left cast: dropped after
    keep, drop = results
    assert keep.method == drop.method == "float64_reference" and keep.deltas.keys() == drop.deltas.keys()
    for name, d in keep.deltas.items():
        assert torch.equal(d.chunk(0, d.numel, "cpu"), drop.deltas[name].chunk(0, d.numel, "cpu")), name


@pytest.mark.fast
def test_a_benchmark_arm_on_its_own_copy_reads_its_start_from_the_pristine_model_and_keeps_no_copy():
    """A fresh training arm's model is its own copy of the pristine model: it is not put back after the arm
    (no copy of its parameters kept), and the state its second compile starts from is the pristine model's own
    tensors, not one more copy (a 1B model's 2.4 GB each). A copy sharing the weights (inference) is neither."""
    from ctc_doctor.analyzer.phases.bench.arms import Arm, materialized

    w = _blocks_train()
    arm = Arm("compiled", "", w.model, w.calls(), True, {}, [], fresh=True)
    with materialized(arm, w.model, None, share=False) as ready:
        assert ready.owned and ready.origin is w.model and ready.model is not w.model
        start = {k: v for k, v in ready.origin.state_dict().items()}
        assert all(start[k].data_ptr() == v.data_ptr() for k, v in w.model.state_dict().items())
    assert not arm.owned and arm.origin is None and arm.model is w.model
    with materialized(arm, w.model, None, share=True) as shared:
        assert not shared.owned
