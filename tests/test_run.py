"""`ctc-doctor run -- SCRIPT`: real scripts in real subprocesses, one process and two gloo ranks.

The fixture scripts (ctc_doctor/fixtures/scripts) are run unmodified; what they print, how they
exit, what they compile and where they break or recompile must come back exactly.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from ctc_doctor.analyzer.capture.compiles import CompileRecorder, StopScript
from ctc_doctor.analyzer.resources.cpu import busy, cores
from ctc_doctor.errors import ExitCode
from ctc_doctor.reports import load_report
from ctc_doctor.reports.advice import next_steps
from ctc_doctor.reports.models import Report
from ctc_doctor.reports.verdicts import strategy_verdict
from ctc_doctor.tui.live_run import LiveRun

from .conftest import PRINTING_NET, REPO, TARGETS, ctrl_c_reaches_the_child

SCRIPTS = REPO / "ctc_doctor" / "fixtures" / "scripts"
TRAIN = SCRIPTS / "train.py"
TWO_RANKS = SCRIPTS / "two_ranks.py"


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def compiles_nothing(tmp_path: Path) -> Path:
    script = tmp_path / "plain.py"
    script.write_text("import torch\nprint('eager only', torch.ones(2).sum().item())\n")
    return script


def hangs(tmp_path: Path, prelude: str = "", pid_first: bool = False) -> Path:
    """A script that compiles once, prints its pid and hangs; `prelude` runs first, before torch is
    imported; `pid_first` prints the pid before the import and the compile (a rank slow to start on a
    busy machine is still seen)."""
    pid = "print('pid', os.getpid(), flush=True)\n"
    compile_once = "import torch\nf = torch.compile(lambda x: x * 2, backend='eager')\nf(torch.ones(3))\n"
    body = pid + compile_once if pid_first else compile_once + pid
    script = tmp_path / "hang.py"
    script.write_text(prelude + "import os, time\n" + body + "while True:\n    time.sleep(0.05)\n")
    return script


def alive(pid: int) -> bool:
    """Running (a zombie no one reaped yet, as in a container whose init does not, counts as gone)."""
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            return not any(line.startswith("State:") and "Z" in line.split()[1] for line in fh)
    except (ProcessLookupError, FileNotFoundError):
        return False


# --- one process ----------------------------------------------------------------------------------


def test_run_diagnoses_an_unmodified_training_script(cli, tmp_path):
    out = tmp_path / "r.json"
    limits = ("--memory-limit", "200", "--budget", "300")
    result = cli("run", *limits, "--json", str(out), "--", str(TRAIN), "--backend", "eager", "--steps", "4")
    assert result.returncode == ExitCode.OK, result.stderr
    # the script's own output passes through, on stdout, in order
    steps = [line.split()[:4] for line in result.stdout.splitlines() if line.startswith("step")]
    assert steps == [
        ["step", "0", "batch", "8"],
        ["step", "1", "batch", "8"],
        ["step", "2", "batch", "8"],
        ["step", "3", "batch", "4"],
    ]
    assert result.stdout.index("done\n") < result.stdout.index("verdict")  # the script's output, then the report
    report = load_report(out)
    assert report.target.kind == "script" and report.target.command == [
        str(TRAIN),
        "--backend",
        "eager",
        "--steps",
        "4",
    ]
    assert report.run.exit_code == 0 and report.run.stopped is None
    assert [(c.name, c.kind, c.calls, c.options.get("backend")) for c in report.compiled] == [("Net", "module", 4, "eager")]
    assert report.target.train  # its backward reached what the compiled model returned: a training run
    # the break: exact file and line, in the nested module
    site = next(s for s in report.graph_breaks if s.gb_type == "Data-dependent branching")
    frame = site.own_frame or site.user_frame
    assert os.path.samefile(frame.file, TRAIN) and frame.line == line_of(TRAIN, "if x.abs().mean() > 1.0")
    assert site.module_paths == ["blocks.1.norm"] and "GB0170" in site.registry_ids
    assert all("runpy" not in f.file for f in site.user_stack)
    # the smaller last batch: a recompile on dim 0 of the batch, 8 -> 4
    sizes = [g for r in report.recompiles for g in r.failed_guards if g.kind == "size"]
    assert any(g.dim == 0 and (g.expected, g.actual) == ("8", "4") for g in sizes)
    # bisection and a verified fix, as for a build() target
    assert report.bisect is not None and "blocks.1.norm" in report.bisect.smallest_failing
    assert report.fix is not None and report.fix.applied
    v = report.fix.verification
    assert v.numerics_ok and v.after.unique_break_sites == 0 < v.before.unique_break_sites
    assert "script: " in result.stdout and "blocks.1.norm" in result.stdout
    # the doctor's own cost, as for a build() target: the script's own run under capture is the workload,
    # the phases after it are the doctor's, sized with --memory-limit
    cost = report.cost
    phases = [p.phase for p in cost.phases]
    assert phases[0] == "script" and {"bisection", "fix reference", "fix checks"} <= set(phases), phases
    assert cost.workload_basis.startswith("the script's own run under capture") and cost.workload_wall_s > 0
    assert cost.summary.startswith("the doctor used ") and cost.reference.room_basis == "--memory-limit"
    assert "doctor's cost: the doctor used" in result.stdout


def test_run_json_dash_keeps_stdout_for_the_report_and_accepts_python_and_m(cli):
    result = cli(
        "run", "--json", "-", "--no-bisect", "--no-fix", "--max-steps", "2", "--",
        "python", "-m", "ctc_doctor.fixtures.scripts.train", "--backend", "eager", "--steps", "6",
    )  # fmt: skip
    assert result.returncode == ExitCode.OK, result.stderr
    report = Report.model_validate(json.loads(result.stdout))  # nothing else on stdout
    assert "step 1 batch 8" in result.stderr and "step 2" not in result.stderr  # the script's stdout moved to stderr
    assert report.target.command[:2] == ["-m", "ctc_doctor.fixtures.scripts.train"]
    assert report.run.stopped == "max_steps" and report.compiled[0].calls == 2
    assert any("stopped after 2 call(s) of" in n for n in report.notes), report.notes
    assert report.bisect is None and report.fix is None


def test_a_failing_script_still_yields_its_report_and_exit_code_11(cli, tmp_path):
    out = tmp_path / "r.json"
    result = cli(
        "run",
        "--json",
        str(out),
        "--no-bisect",
        "--no-fix",
        "--",
        str(TRAIN),
        "--backend",
        "eager",
        "--fail-at",
        "1",
    )
    assert result.returncode == ExitCode.SCRIPT_FAILED, result.stderr
    assert "ValueError: bad batch at step 1" in result.stderr  # its traceback, as python prints it
    assert "script_runner" not in result.stderr.split("Traceback", 1)[1].split("ValueError")[0]
    report = load_report(out)
    assert report.run.exit_code == 1 and report.run.script_error.startswith("ValueError: bad batch at step 1")
    assert report.graph_breaks  # step 0 compiled before the failure
    assert any(e.phase == "script" for e in report.errors)


def test_a_script_whose_compile_segfaults_keeps_the_report_its_traces_give_and_says_how_it_died(cli, tmp_path):
    script = tmp_path / "crash.py"
    script.write_text(
        "import ctypes\n\nimport torch\n\n\n"
        "@torch._dynamo.register_backend(name='segv')\n"
        "def segv(gm, example_inputs):\n"
        "    ctypes.string_at(0)\n\n\n"
        "model = torch.nn.Linear(4, 4)\n"
        "for _ in range(3):\n"
        "    torch.compile(model, backend='eager')(torch.randn(2, 4))\n"
        "torch.compile(lambda x: x * 2, backend='segv')(torch.randn(2))\n"
    )
    out = tmp_path / "r.json"
    result = cli("run", "--json", str(out), "-q", "--", str(script))
    assert result.returncode == ExitCode.SCRIPT_FAILED, result.stderr
    report = load_report(out)
    assert report.run.exit_code == -11 and report.run.script_error == "the script's process died (SIGSEGV)"
    assert report.summary.graphs_compiled >= 1  # what compiled before the crash, from its traces


def test_exit_codes_of_scripts_that_compile_nothing_or_exit_nonzero(cli, tmp_path):
    result = cli("run", "--", str(compiles_nothing(tmp_path)))
    assert result.returncode == ExitCode.NOTHING_COMPILED, result.stderr
    assert "eager only 2.0" in result.stdout
    assert "never called torch.compile" in result.stderr and "verdict" not in result.stderr
    exits = tmp_path / "exits.py"
    exits.write_text("import sys, torch\ntorch.compile(lambda x: x + 1, backend='eager')(torch.ones(2))\nsys.exit(3)\n")
    out = tmp_path / "r.json"
    result = cli("run", "--json", str(out), "--", str(exits))
    assert result.returncode == ExitCode.SCRIPT_FAILED, result.stderr
    assert load_report(out).run.exit_code == 3


@pytest.mark.fast
def test_the_parent_process_imports_no_torch():
    code = "import sys\nfrom ctc_doctor.analyzer.doors import launch\nprint('torch' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.fast
def test_usage_errors_are_one_line(cli, tmp_path):
    missing = cli("run", "--", str(tmp_path / "nope.py"))
    assert missing.returncode == ExitCode.TARGET_NOT_FOUND
    assert missing.stderr.strip().splitlines() == [f"ctc-doctor: error: no such script: {tmp_path / 'nope.py'}"]
    assert cli("run").returncode == ExitCode.USAGE
    assert cli("run", "--", "python", "-c", "print(1)").returncode == ExitCode.TARGET_NOT_FOUND
    bad = tmp_path / "bad.py"
    bad.write_text("x = (\n")
    syntax = cli("run", "--", str(bad))
    assert syntax.returncode == ExitCode.TARGET_INVALID and len(syntax.stderr.strip().splitlines()) == 1
    assert "bad.py:1:" in syntax.stderr and "Traceback" not in syntax.stderr
    module = cli("run", "--", "-m", "no_such_module_xyz")
    assert module.returncode == ExitCode.TARGET_NOT_FOUND and "no module named 'no_such_module_xyz'" in module.stderr
    assert cli("run", "--timeout", "0", "--", str(bad)).returncode == ExitCode.USAGE


def test_model_compile_is_analyzed_like_torch_compile_without_extra_calls(cli, tmp_path):
    script = tmp_path / "method.py"
    script.write_text(
        "import torch, torch.nn as nn\n"
        "class Gate(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(8, 8)\n"
        "    def forward(self, x):\n"
        "        print('forward of gate')\n"
        "        return self.fc(x)\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.inp, self.gate, self.out = nn.Linear(8, 8), Gate(), nn.Linear(8, 2)\n"
        "    def forward(self, x):\n"
        "        return self.out(self.gate(self.inp(x)))\n"
        "model = Net()\n"
        "model.compile(backend='eager')\n"
        "for step in range(3):\n"
        "    model(torch.randn(4, 8)).sum().backward()\n"
    )
    out = tmp_path / "r.json"
    result = cli("run", "--json", str(out), "-q", "--", str(script))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("forward of gate") == 3  # the script's calls only: the doctor's re-runs are silent
    report = load_report(out)
    (obj,) = report.compiled
    assert (obj.kind, obj.calls) == ("method", 3)
    (site,) = report.graph_breaks
    assert site.module_paths == ["gate"] and site.user_frame.line == 7
    assert report.bisect is not None and report.bisect.smallest_failing == ["gate"]


def test_each_frame_of_a_scripts_compiled_model_says_which_calls_it_served_compiled_and_which_ran_eagerly(cli, tmp_path):
    """Per-frame counts under `run`, counted during the script's own calls: the step counter's forward is
    served compiled until the recompile limit (8 versions), then runs its own code for the calls left;
    the frames of another compiled function the script calls are not the analyzed object's."""
    script = tmp_path / "steps.py"
    script.write_text(
        "import torch\n"
        "class Net(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc, self.step = torch.nn.Linear(8, 8), 0\n"
        "    def forward(self, x):\n"
        "        return self.fc(x) / (1 + self.step)\n"
        "model = torch.compile(Net(), backend='eager')\n"
        "other = torch.compile(lambda t: t * 2, backend='eager')\n"
        "for step in range(11):\n"
        "    model.step = step\n"
        "    other(model(torch.randn(4, 8)))\n"
    )
    out = tmp_path / "r.json"
    result = cli("run", "--no-bisect", "--no-fix", "--json", str(out), "--", str(script))
    assert result.returncode == 0, result.stderr
    report = load_report(out)
    [frame] = report.frame_calls
    assert (frame.function, frame.compiled, frame.eager, frame.first_eager_call) == ("forward", 8, 3, 8), frame
    assert frame.by_call == [[i, 1, 0] for i in range(8)] + [[i, 0, 1] for i in range(8, 11)]
    assert frame.why_eager.startswith("the recompile limit (compile 0/8)")
    [cliff] = report.recompile_cliffs
    assert (cliff.from_call, cliff.ran_eagerly) == (8, 3) and "(counted)" in result.stdout, result.stdout


def test_a_script_whose_compile_crashes_inside_torch_gets_the_bug_ready_to_file_and_a_verified_way_around(cli, tmp_path):
    """The script's own compile crashes in AOTAutograd (a symbolic int under `%`, torch 2.13): the report
    says it is PyTorch's, which stage (the cheaper backend compiles), the user's line; the repro it writes
    fails the same way under plain `python`; the issue text is written beside it; and a workaround is
    checked on the script's recorded calls (`dynamic=False` keeps the int static)."""
    script = tmp_path / "crash.py"
    script.write_text(
        "import torch\n"
        "torch._dynamo.config.allow_unspec_int_on_nn_module = True\n"
        "class Net(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc, self.step = torch.nn.Linear(8, 8), 0\n"
        "    def forward(self, x):\n"
        "        self.step += 1\n"
        "        return self.fc(x) * (1.0 / (1 + self.step % 1000))\n"
        "model = torch.compile(Net(), backend='aot_eager')\n"
        "for _ in range(4):\n"
        "    model(torch.randn(4, 8))\n"
    )
    out = tmp_path / "r.json"
    result = cli("run", "--no-bisect", "--no-fix", "--json", str(out), "--", str(script))
    assert result.returncode == ExitCode.SCRIPT_FAILED, result.stderr
    report = load_report(out)
    if not report.torch_bugs and "python_mod" not in (report.errors[0].message if report.errors else ""):
        pytest.skip(f"torch {torch.__version__}: this compile does not crash here")
    [bug] = report.torch_bugs
    assert (bug.stage, bug.error_type) == ("AOTAutograd", "AttributeError") and bug.tried[0].endswith("compiles and runs")
    assert bug.user_line == f"{script}:9" and "self.step % 1000" in bug.user_code
    assert bug.repro_verified is True and bug.repro_path == str(tmp_path / "ctc_torch_bug_script.py")
    again = subprocess.run([sys.executable, bug.repro_path], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert again.returncode != 0 and "python_mod" in again.stderr
    assert (tmp_path / "ctc_torch_bug_script.md").read_text().startswith("# torch.compile: AOTAutograd crashes")
    assert bug.workaround_verified and "dynamic=False" in bug.workaround
    assert report.errors[0].hint.startswith("a bug inside PyTorch (AOTAutograd), not in your code")
    assert "a PyTorch bug, ready to file" in result.stdout and "upstream" not in (report.errors[0].hint or "")


def test_a_script_whose_own_dynamic_true_crashes_inside_torch_is_triaged_with_its_own_compile(cli, tmp_path):
    """`torch.compile(model, dynamic=True)` makes the script's Python int symbolic and AOTAutograd crashes
    (torch 2.13: `python_mod`). Replayed without the script's `dynamic=True` the calls compiled ("not
    triaged"); replayed with it, the bug is named, its repro fails under plain `python`, `dynamic=False` is
    verified on the recorded calls, and the whole script runs to its end with it (`run --compare static`)."""
    script = tmp_path / "crash_dynamic.py"
    script.write_text(
        "import torch\n"
        "class Net(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = torch.nn.Linear(8, 8)\n"
        "    def forward(self, x, step):\n"
        "        return self.fc(x) * (1.0 / (1 + step % 1000))\n"
        "model = torch.compile(Net(), dynamic=True)\n"
        "for step in range(4):\n"
        "    model(torch.randn(4, 8), step)\n"
    )
    out = tmp_path / "r.json"
    result = cli("run", "--no-bisect", "--no-fix", "--repro-dir", str(tmp_path), "--json", str(out), "--", str(script))
    assert result.returncode == ExitCode.SCRIPT_FAILED, result.stderr
    report = load_report(out)
    if not report.torch_bugs and "python_mod" not in (report.errors[0].message if report.errors else ""):
        pytest.skip(f"torch {torch.__version__}: this compile does not crash here")
    assert not any("not triaged" in n for n in report.notes), report.notes
    [bug] = report.torch_bugs
    assert (bug.stage, bug.error_type) == ("AOTAutograd", "AttributeError") and bug.user_line == f"{script}:7"
    assert bug.tried[-1] == "(each with the compile's own dynamic=True)", bug.tried
    assert bug.repro_verified is True and "dynamic=True" in bug.repro
    again = subprocess.run([sys.executable, bug.repro_path], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert again.returncode != 0 and "python_mod" in again.stderr
    assert bug.workaround_verified and bug.workaround.startswith("compile with `dynamic=False` in place of your `dynamic=True`")
    assert bug.workaround_strategy == "static" and bug.workaround_rerun.startswith("ran to its end (`run --compare static`"), bug
    assert "the whole script with it: ran to its end" in " ".join(result.stdout.split())


@pytest.mark.parametrize("name", ["showcase", "step_counter", "train_step"])
def test_a_model_gets_the_same_diagnosis_as_a_build_target_and_from_a_script_under_run(cli, tmp_path, name):
    """One doctor, one door (`pipeline.later_phases`): the same zoo model analyzed as a build() target and
    called from a small script under `run` gives the same break sites, recompile causes with their
    recurrence, suggestions, verdicts, verified counts, next steps and later cost phases (the showcase; the
    training-step fixture's model, a break and two recompiles, its calls under no_grad in both
    doors; the step counter, a recompile-limit cliff). Where a
    script's replay cannot see what its calls did (the step counter's recompiles come from state the
    script sets between calls, not from inputs), `run` says so rather than measure nothing."""
    from .conftest import fixed

    built = fixed(name)
    out = tmp_path / "r.json"
    result = cli("run", "--no-bisect", "-q", "--json", str(out), "--", str(TARGETS / "zoo_script.py"), name)
    assert result.returncode == 0, result.stderr
    ran = load_report(out)

    def sites(r):
        return sorted((s.user_frame.file, s.user_frame.line, s.gb_type, tuple(s.module_paths)) for s in r.graph_breaks)

    assert sites(ran) == sites(built)
    assert ran.target.train is built.target.train is False  # a script that runs no backward is inference

    def causes(r):  # with how they recur and whether they are expected: the lock's view of a cause
        return sorted((c.kind, c.summary, c.recurrence, bool(c.expected)) for c in r.recompile_causes)

    assert causes(ran) == causes(built)
    assert (ran.summary.graphs_compiled, ran.summary.recompile_count) == (built.summary.graphs_compiled, built.summary.recompile_count)
    assert [(s.rule, s.title) for s in ran.suggestions] == [(s.rule, s.title) for s in built.suggestions]
    if name != "step_counter":  # input-driven: every check replays what it needs
        assert [(s.rule, s.verdict, s.verified.summary if s.verified else None) for s in ran.suggestions] == [
            (s.rule, s.verdict, s.verified.summary if s.verified else None) for s in built.suggestions
        ]
        assert ran.fix.applied == built.fix.applied
        order = [re.findall(r"\[(S\d+)[,\]]", step)[:1] for step in next_steps(ran)]
        assert order == [re.findall(r"\[(S\d+)[,\]]", step)[:1] for step in next_steps(built)]  # the same next steps, in order

        def later(r):  # the cost section's phases after the analysis: the one door runs the same ones
            return [p.phase for p in r.cost.phases if p.phase in ("suggest", "fix reference", "fix checks", "accuracy")]

        assert later(ran) == later(built) and "fix checks" in later(built), (later(ran), later(built))
    else:
        assert all(s.verified is None for s in ran.suggestions) and ran.fix.applied == []
        assert any("not verified: the replayed calls do not reproduce R1" in n for n in ran.fix.notes), ran.fix.notes


def test_a_compile_the_user_wrote_stays_the_users_when_lightning_wraps_torch_compile(cli, tmp_path):
    """Lightning replaces `torch.compile` with a wrapper that records its arguments
    (`lightning/fabric/wrappers.py`). The compile on the user's line inside a LightningModule is still the
    user's: its site is that line, no library compiled it, and the advice is the user's to take (mark the
    changing batch dim dynamic), not "pass dynamic=True to lightning's compile call"."""
    pytest.importorskip("lightning")
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\n"
        "import lightning as L\n"
        "class Net(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = torch.nn.Linear(8, 1)\n"
        "    def forward(self, x):\n"
        "        return self.fc(x)\n"
        "class Lit(L.LightningModule):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.net = torch.compile(Net())\n"
        "    def training_step(self, batch, i):\n"
        "        x, y = batch\n"
        "        return torch.nn.functional.mse_loss(self.net(x), y)\n"
        "    def configure_optimizers(self):\n"
        "        return torch.optim.SGD(self.parameters(), lr=0.1)\n"
        "data = [(torch.randn(n, 8), torch.randn(n, 1)) for n in (4, 5, 6, 7)]\n"
        "trainer = L.Trainer(max_steps=4, accelerator='cpu', logger=False, enable_checkpointing=False,\n"
        "                    enable_progress_bar=False, enable_model_summary=False)\n"
        "trainer.fit(Lit(), torch.utils.data.DataLoader(data, batch_size=None))\n"
    )
    out = tmp_path / "r.json"
    result = cli("run", "--no-bisect", "--no-fix", "--backend", "eager", "--json", str(out), "--", str(script), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = load_report(out)
    (obj,) = report.compiled
    assert obj.site == "train.py:12" and obj.library is None, (obj.site, obj.library)
    rules = [s.rule for s in report.suggestions]
    assert rules and rules[0] == "mark-dynamic" and "lightning" not in report.suggestions[0].title, [s.title for s in report.suggestions]
    # the LightningModule itself compiled, with `self.log` in its step: torch 2.13's Dynamo crashes tracing
    # it; the report names the user's line it was tracing and the way around it, not `trainer.fit`, and
    # runs the script once more as advised
    whole = tmp_path / "whole.py"
    whole.write_text(
        script.read_text()
        .replace("        self.net = torch.compile(Net())\n", "        self.net = Net()\n")
        .replace("        return torch.nn.functional.mse_loss(self.net(x), y)\n",
                 "        loss = torch.nn.functional.mse_loss(self.net(x), y)\n        self.log('loss', loss)\n        return loss\n")
        .replace("trainer.fit(Lit(),", "trainer.fit(torch.compile(Lit()),")
    )  # fmt: skip
    crashed = cli("run", "--no-bisect", "--json", str(out), "--", str(whole), cwd=tmp_path)
    report = load_report(out)
    if crashed.returncode == 0:
        assert not report.torch_bugs  # a torch that traces it: nothing to triage
        return
    [bug] = report.torch_bugs
    assert bug.stage == "Dynamo" and bug.user_line.endswith("whole.py:16") and bug.user_code == "self.log('loss', loss)", bug
    assert "self.net = torch.compile(Net())" in bug.workaround and bug.operation == "lightning's log"
    # the advice checked by running the script so: the LightningModule's network compiled in its place
    assert bug.workaround_strategy == "submodules" and bug.workaround_rerun.startswith("ran to its end (`run --compare submodules`")
    assert bug.workaround_verified, bug
    assert report.errors[0].hint.startswith("a bug inside PyTorch (Dynamo), while tracing your line whole.py:16")
    assert next_steps(report)[0].startswith("PyTorch bug: the script's compile of Lit crashes in Dynamo")


def test_timeout_stops_a_script_that_handles_sigterm_itself(cli, tmp_path):
    script = tmp_path / "stubborn.py"
    script.write_text(
        "import signal, time, torch\n"
        "signal.signal(signal.SIGTERM, lambda signum, frame: None)  # checkpoint-on-preemption style\n"
        "f = torch.compile(lambda x: x.sin() + 1, backend='eager')\n"
        "f(torch.randn(3))\n"
        "while True:\n"
        "    time.sleep(0.1)\n"
    )
    out = tmp_path / "r.json"
    result = cli("run", "--timeout", "8", "--json", str(out), "-q", "--", str(script), timeout=120)
    assert result.returncode == ExitCode.TIMEOUT, result.stderr
    report = load_report(out)
    # the rank's own report (not the trace fallback): stopped by the runner before the parent's SIGKILL
    assert report.run.stopped == "timeout" and [o.name for o in report.compiled] == ["<lambda>"]


def test_run_check_gates_ci_on_a_real_script(cli):
    failed = cli("run", "--check", "--", str(TRAIN), "--backend", "eager", "--steps", "2")
    assert failed.returncode == ExitCode.CHECK_FAILED, failed.stderr
    assert "ctc-doctor check: FAILED" in failed.stderr
    allowed = cli(
        "run",
        "--max-graph-breaks",
        "2",
        "--max-recompiles",
        "20",
        "-q",
        "--",
        str(TRAIN),
        "--backend",
        "eager",
        "--steps",
        "2",
    )
    assert allowed.returncode == ExitCode.OK, allowed.stderr
    assert "ctc-doctor check: passed" in allowed.stderr


def test_ctrl_c_stops_the_script_and_still_writes_the_report(tmp_path):
    out = tmp_path / "r.json"
    env = {**os.environ, "PYTHONPATH": str(TARGETS), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctc_doctor", "run", "-q", "--json", str(out), "--", str(hangs(tmp_path))],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_reaches_the_child,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        pid = int(proc.stdout.readline().split()[1])  # the script is running and has compiled
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == ExitCode.INTERRUPTED
    finally:
        proc.kill()
    report = load_report(out)
    assert report.run.stopped == "interrupted" and report.summary.graph_count == 1
    assert not alive(pid)


# --- two ranks (torchrun, gloo) ---------------------------------------------------------------------


def test_two_ranks_report_each_rank_and_the_divergence_root_cause(cli, tmp_path):
    out = tmp_path / "r.json"
    result = cli("run", "--nproc", "2", "--json", str(out), "--", str(TWO_RANKS), "--backend", "eager")
    assert result.returncode == ExitCode.OK, result.stderr
    assert "step 3 loss" in result.stdout and "done" in result.stdout
    report = load_report(out)
    assert report.run.ranks == 2 and [r.rank for r in report.ranks] == [0, 1]
    assert [r.recompile_count for r in report.ranks] == [0, 1]
    root = report.divergence[0]
    assert root.kind == "root_cause" and root.ranks == [1]
    assert "size of x (dim 0)" in root.message and "expected 8, actual 4" in root.message
    assert "root cause" in result.stdout


def test_timeout_stops_every_rank_of_a_hanging_script(cli, tmp_path):
    out = tmp_path / "r.json"
    started = time.monotonic()
    result = cli("run", "--nproc", "2", "--timeout", "15", "--json", str(out), "--", str(hangs(tmp_path)), timeout=120)
    assert result.returncode == ExitCode.TIMEOUT, result.stderr
    assert time.monotonic() - started < 60
    pids = [int(line.split()[1]) for line in result.stdout.splitlines() if line.startswith("pid ")]
    assert len(pids) == 2 and not any(alive(p) for p in pids)
    report = load_report(out)
    assert report.run.stopped == "timeout" and [r.rank for r in report.ranks] == [0, 1]
    assert any(e.type == "ScriptTimeout" for e in report.errors)
    assert "SignalException" not in result.stderr


def test_a_rank_deaf_to_signals_is_killed_through_its_own_session_once_the_grace_is_over(tmp_path):
    """torchrun starts each rank in a session of its own and gives it 30 s after its SIGTERM: a rank deaf to
    SIGTERM and SIGALRM (as one stuck in a collective is) outlived the kill of torchrun's group when the
    grace ran out first. Its own session (`rank1.pid`) is killed too."""
    from ctc_doctor.analyzer.doors.launch import RunOptions, run_script

    deaf = (
        "import os, signal\n"
        "if os.environ.get('RANK') == '1':\n"
        "    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM, signal.SIGALRM])\n"
    )
    script = hangs(tmp_path, prelude=deaf, pid_first=True)
    printed = tmp_path / "stdout.txt"
    with open(printed, "w") as out:
        result = run_script([str(script)], RunOptions(nproc=2, timeout_s=20, grace_s=3), say=lambda line: None, stdout=out)
    assert result.status == "timeout"
    time.sleep(0.5)
    pids = [int(line.split()[1]) for line in printed.read_text().splitlines() if line.startswith("pid ")]
    assert len(pids) == 2 and not any(alive(p) for p in pids), pids


# --- in-process pieces --------------------------------------------------------------------------------


def test_compile_recorder_sees_every_form_of_torch_compile():
    recorder = CompileRecorder(backend="eager", max_steps=3)
    with recorder.installed():
        model = torch.nn.Linear(4, 2)
        compiled = torch.compile(model, mode="max-autotune")  # inductor's mode: dropped with --backend eager

        @torch.compile(backend="inductor")
        def double(x):
            return x * 2

        other = torch.nn.ReLU()
        other.compile()
        for n in (3, 3, 5):
            compiled(torch.ones(n, 4))
        double(torch.ones(2))
        other(torch.ones(2))
        with pytest.raises(StopScript):
            compiled(torch.ones(3, 4))  # the 4th call of the first compiled module: --max-steps 3
    assert torch.compile.__module__.startswith("torch")  # put back
    assert [(o.name, o.kind, o.calls) for o in recorder.objects] == [
        ("Linear", "module", 3),
        ("double", "function", 1),
        ("ReLU", "method", 1),
    ]
    assert all(o.options["backend"] == "eager" for o in recorder.objects)
    assert recorder.primary is recorder.objects[0] and recorder.stopped_after == 3
    assert [r.description for r in recorder.primary.recorded] == [
        "input: float32[3, 4]",
        "input: float32[5, 4]",
    ]
    assert [r.description for r in recorder.objects[1].recorded] == ["x: float32[2]"]  # a function's own names
    assert any("mode" in note for note in recorder.notes)


@pytest.mark.fast
def test_live_run_keeps_the_scripts_arguments_after_the_separator():
    live = LiveRun(["run", "--tui", "--json", "r.json", "--", "train.py", "--json", "theirs.json"], report_path=None)
    command = live.command
    separator = command.index("--")
    assert command[separator:] == ["--", "train.py", "--json", "theirs.json"]
    assert "--quiet" in command[:separator] and command[command.index("--json") + 1] == "r.json"


def test_a_compile_of_something_already_compiled_ends_as_the_plain_script_does(cli, tmp_path):
    """`model.forward = torch.compile(model.forward)`, then a second compile over the module's call (as
    transformers' generate compile does): the doctor's call recording is never traced by the outer compile,
    so the script ends as it does plain and no report names a ctc_doctor frame."""
    script = tmp_path / "double.py"
    script.write_text(
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.lin = torch.nn.Linear(8, 8)\n"
        "    def forward(self, x):\n"
        "        return torch.relu(self.lin(x))\n"
        "m = M()\n"
        "m.forward = torch.compile(m.forward, backend='eager')\n"
        "outer = torch.compile(m.__call__, backend='eager')\n"
        "for _ in range(3):\n"
        "    y = outer(torch.randn(2, 8))\n"
        "print('OK', tuple(y.shape))\n"
    )
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0 and "OK (2, 8)" in plain.stdout, plain.stderr
    out = tmp_path / "r.json"
    result = cli("run", "--no-bisect", "--json", str(out), "-q", "--", str(script))
    assert result.returncode == 0 and "OK (2, 8)" in result.stdout, result.stderr
    report = load_report(out)
    assert report.errors == [] and report.summary.verdict == "clean"
    frames = [s.user_frame.file for s in report.graph_breaks] + [r.file for r in report.recompiles]
    assert not any("ctc_doctor" in f for f in frames), frames


def test_compare_runs_the_script_once_per_strategy_and_times_each_by_its_own_calls(cli, tmp_path):
    """`--compare eager,default,dynamic`: three runs of an unmodified loop, each row timed from the calls
    of the compiled object (eager's calls watched though nothing is compiled), with its compile and a
    verdict line; a script with too few calls gets a note, not a made-up pace."""
    script = tmp_path / "loop.py"
    script.write_text(
        "import sys, torch\n"
        "model = torch.compile(torch.nn.Linear(8, 8), backend='eager')\n"
        "for _ in range(int(sys.argv[1])):\n"
        "    model(torch.randn(4, 8))\n"
        "print('done')\n"
    )
    out = tmp_path / "r.json"
    result = cli("run", "--compare", "dynamic,eager", "--no-bisect", "--no-fix", "--json", str(out), "--", str(script), "12")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("done") == 3  # the script ran once per strategy
    rows = {r.strategy: r for r in load_report(out).comparison}
    assert list(rows) == ["eager", "default", "dynamic"]  # eager first, the run itself as default
    assert all(r.calls == 12 and r.period_ms and r.period_ms > 0 and r.error is None for r in rows.values())
    assert rows["eager"].graphs_compiled == 0 and rows["default"].graphs_compiled >= 1
    assert rows["default"].speedup is not None and rows["eager"].speedup is None
    assert "fastest steady pace:" in result.stdout and "for 12 calls the least total time:" in result.stdout
    few = cli("run", "--compare", "eager", "--no-bisect", "--no-fix", "--json", str(out), "-q", "--", str(script), "2")
    assert few.returncode == 0, few.stderr
    assert all("too few to measure a pace" in (r.error or "") for r in load_report(out).comparison)
    bad = cli("run", "--compare", "fastest", "--", str(script), "2")
    assert bad.returncode == 2 and "unknown strategy fastest" in bad.stderr
    # each row says how much CPU others took while it ran (other tests share the cores under xdist), and is
    # called unstable for it exactly when that crosses the busy rule
    for r in rows.values():
        assert r.busy is not None and r.busy >= 0, r
        assert ("other processes used" in (r.unstable or "")) == busy(r.busy, cores()), r


def test_compare_rows_timed_while_other_processes_held_the_cores_say_so(cli, tmp_path):
    """Two busy loops beside `run --compare eager`: each run of the script had others on the cores, so its
    row is unstable and says why (pyperf's rule, as for the benchmark's arms)."""
    script = tmp_path / "loop.py"
    script.write_text(
        "import torch\nmodel = torch.compile(torch.nn.Linear(8, 8), backend='eager')\nfor _ in range(40):\n    model(torch.randn(4, 8))\n"
    )
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        out = tmp_path / "r.json"
        result = cli("run", "--compare", "eager", "--no-bisect", "--no-fix", "--json", str(out), "-q", "--", str(script))
    finally:
        for p in loops:
            p.kill()
            p.wait()
    assert result.returncode == 0, result.stderr
    rows = load_report(out).comparison
    assert all(r.busy is not None and r.busy >= 1.0 and "other processes used" in (r.unstable or "") for r in rows), rows


def test_compare_optimizer_compiles_the_step_of_every_optimizer_the_script_creates(cli, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\n"
        "model = torch.compile(torch.nn.Linear(8, 8), backend='eager')\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)\n"
        "for _ in range(6):\n"
        "    model(torch.randn(4, 8)).sum().backward()\n"
        "    opt.step()\n"
        "    opt.zero_grad()\n"
        "print('step is', type(opt.step).__name__)\n"
    )
    out = tmp_path / "r.json"
    result = cli(
        "run", "--compare", "optimizer", "--backend", "eager", "--no-bisect", "--no-fix", "-q", "--json", str(out), "--", str(script)
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("step is method") == 1 and result.stdout.count("step is function") == 1  # compiled once, not twice
    rows = {r.strategy: r for r in load_report(out).comparison}
    assert rows["optimizer"].graphs_compiled > rows["default"].graphs_compiled  # the optimizer's step compiled too


DRIFTING_LM = (
    "import sys, torch\n"
    "class LM(torch.nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.emb = torch.nn.Embedding(50, 16)\n"
    "        self.out = torch.nn.Linear(16, 50)\n"
    "    def forward(self, ids, labels):\n"
    "        x = self.emb(ids)\n"
    "        if len(sys.argv) > 1 and torch.compiler.is_compiling():\n"
    "            x = x * 1.5\n"
    "        return torch.nn.functional.cross_entropy(self.out(x).flatten(0, 1), labels.flatten())\n"
    "model = torch.compile(LM(), backend='eager')\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "for step in range(12):\n"
    "    ids = torch.randint(0, 50, (4, 8 + 4 * (step % 3)))\n"
    "    model(ids, ids).backward()\n"
    "    opt.step()\n"
    "    opt.zero_grad()\n"
)
"""A language model trained on batches of 3 lengths; with an argument, its compiled path scales the
embedding (only while Dynamo traces), so its loss departs from eager's."""


def test_compare_marks_the_dims_the_scripts_own_run_saw_vary_and_compares_its_losses_with_eagers(cli, tmp_path):
    """`--compare mark-dynamic`: the dims behind the script's size recompile (its mark_dynamic suggestion)
    marked before each call, so it compiles once; every strategy's losses at calls 0, 1, 2, 4, 8 are
    compared with eager's from the same seed. A compiled path that computes something else (planted:
    it scales the embedding only while Dynamo traces) drifts, is flagged and is never the fastest."""
    script = tmp_path / "train.py"
    script.write_text(DRIFTING_LM)
    out = tmp_path / "r.json"
    result = cli("run", "--compare", "eager,mark-dynamic", "--no-bisect", "--no-fix", "--json", str(out), "--", str(script))
    assert result.returncode == 0, result.stderr
    report = load_report(out)
    rows = {r.strategy: r for r in report.comparison}
    assert rows["default"].recompiles >= 1 and rows["mark-dynamic"].recompiles == 0  # ids, labels dim 1 marked
    for name in ("default", "mark-dynamic"):
        assert rows[name].loss_call == 8 and rows[name].loss_ok and rows[name].loss_change < 1e-4, rows[name]
    assert sorted(next(o for o in report.compiled if o.analyzed).losses) == [0, 1, 2, 4, 8]
    assert "loss Δ: the largest change of the loss against eager's" in result.stdout
    drift = cli("run", "--compare", "eager", "--no-bisect", "--no-fix", "-q", "--json", str(out), "--", str(script), "drift")
    assert drift.returncode == 0, drift.stderr
    (row,) = [r for r in load_report(out).comparison if r.strategy == "default"]
    assert row.loss_ok is False and row.loss_change > row.loss_tolerance == 1e-2
    assert strategy_verdict(load_report(out).comparison).startswith("fastest steady pace: eager")


def test_a_compare_row_whose_loss_departs_runs_the_accuracy_bisection_under_its_strategy(cli, tmp_path):
    """`--compare eager` on the drifting script (no fix checks, so its own run cannot see it): the default
    row's loss departs from eager's, so the script runs once more under that strategy, stopped after its
    first call, and the accuracy bisection names the module and the operation only the compiled code runs.
    The modules are compiled with the script's own options as given (`dynamic=False`, not its text)."""
    script = tmp_path / "train.py"
    script.write_text(DRIFTING_LM.replace("backend='eager')", "backend='eager', dynamic=False)"))
    out = tmp_path / "r.json"
    result = cli("run", "--compare", "eager", "--no-fix", "--json", str(out), "--", str(script), "drift")
    assert result.returncode == 0, result.stderr
    report = load_report(out)
    (row,) = [r for r in report.comparison if r.strategy == "default"]
    assert row.loss_ok is False
    a = report.accuracy
    assert a is not None and a.trigger.startswith("run --compare default: the loss departs "), a
    assert a.backend == "eager" and a.options == {"dynamic": False} and a.module_path == "" and a.module_class == "LM" and a.own_code, a
    assert a.operation is not None and a.operation.kind == "traced_only" and a.operation.user_code == "x = x * 1.5", a.operation
    wrong = report.summary.wrong_results
    assert wrong.startswith("run --compare default") and "(LM) diverges compiled alone" in wrong, wrong
    assert "to find where its compile goes wrong" in result.stderr
    assert "wrong" in result.stdout.lower()


def test_a_grad_mode_switch_in_an_evaluation_loop_is_a_one_off_and_each_cause_says_what_it_cost(cli, tmp_path):
    """nanoGPT's pattern: training steps, then `estimate_loss` under `torch.no_grad()`, then training again.
    Grad mode is guarded, so the evaluation compiles once more: a one-off (expected), not the verdict;
    a batch of another size recompiles too, a cause to fix, with its compile seconds and `bounded`."""
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\n"
        "model = torch.compile(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()), backend='eager')\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "@torch.no_grad()\n"
        "def estimate_loss():\n"
        "    return model(torch.randn(4, 8)).pow(2).mean()\n"
        "for step in range(6):\n"
        "    model(torch.randn(4, 8)).pow(2).mean().backward()\n"
        "    opt.step()\n"
        "    opt.zero_grad()\n"
        "    if step % 3 == 2:\n"
        "        estimate_loss()\n"
        "print('done')\n"
    )
    out = tmp_path / "r.json"
    result = cli("run", "--no-bisect", "--no-fix", "--json", str(out), "--", str(script))
    assert result.returncode == 0 and "done" in result.stdout, result.stderr
    report = load_report(out)
    (cause,) = report.recompile_causes
    assert cause.kind == "global_state" and cause.recurrence == "one_off" and cause.expected.startswith("grad mode switches")
    assert report.summary.expected_recompiles == report.summary.recompile_count >= 1
    assert report.summary.verdict == "clean"  # a one-off is said, not alarmed on
    assert cause.compile_time_s > 0 and report.compile_profile is not None
    assert report.compile_profile.total_s >= cause.compile_time_s
    assert "(expected: grad mode switches" in result.stdout and "its only recompiles are expected one-offs" in result.stdout
    assert "in estimate_loss, no_grad)" in " ".join(result.stdout.split())  # where the first recompile was triggered
    assert cause.trigger.endswith("train.py:6 in estimate_loss, no_grad")
    assert not any("Keep grad mode" in step for step in next_steps(report))  # no step for a one-off
    # its evaluation calls are no other shape than its training ones: the calls replayed are training steps
    assert report.target.train is True


def test_a_script_that_trains_and_evaluates_another_batch_under_no_grad_is_replayed_forward_only(cli, tmp_path):
    """A training loop whose evaluation batch, under no_grad, is recorded too (another size): the replays
    cannot give each call its own grad mode, so they run forward only rather than a backward the script
    never ran on its evaluation calls, and the report says so."""
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\n"
        "model = torch.compile(torch.nn.Linear(8, 8), backend='eager')\n"
        "for step in range(3):\n"
        "    model(torch.randn(4, 8)).sum().backward()\n"
        "with torch.no_grad():\n"
        "    model(torch.randn(2, 8))\n"
    )
    out = tmp_path / "r.json"
    result = cli("run", "--no-bisect", "--no-fix", "--json", str(out), "--", str(script))
    assert result.returncode == 0, result.stderr
    report = load_report(out)
    assert report.target.train is False
    assert any(n.startswith("The script trains its compiled model and also calls it under no_grad") for n in report.notes), report.notes


def test_a_script_with_dropout_gets_its_fixes_verified_on_replays_seeded_alike(cli, tmp_path):
    """A training-mode model with dropout and noise drawn in forward, under `run`: the replays of its
    recorded calls are seeded alike per call, so the fix check compares like with like (before, two
    unseeded eager runs differed by their dropout masks and the judgement was noise) and says how."""
    script = tmp_path / "train.py"
    script.write_text(
        "import logging, torch\n"
        "log = logging.getLogger('train')\n"
        "class Net(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc, self.drop, self.out = torch.nn.Linear(16, 16), torch.nn.Dropout(0.1), torch.nn.Linear(16, 4)\n"
        "    def forward(self, x):\n"
        "        h = self.drop(torch.relu(self.fc(x)))\n"
        "        h = h + 0.01 * torch.rand_like(h)\n"
        "        log.warning('step')\n"
        "        return self.out(h)\n"
        "torch.manual_seed(1)\n"
        "model = torch.compile(Net(), backend='eager')\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for step in range(4):\n"
        "    model(torch.randn(8, 16)).pow(2).mean().backward()\n"
        "    opt.step()\n"
        "    opt.zero_grad()\n"
        "print('after', torch.rand(2).tolist())\n"
    )
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    out = tmp_path / "r.json"
    result = cli("run", "--no-bisect", "--json", str(out), "-q", "--", str(script))
    assert result.returncode == 0, result.stderr
    assert result.stdout == plain.stdout  # the script's own random stream, as without the doctor
    report = load_report(out)
    assert report.fix.applied, [(s.id, s.verified) for s in report.suggestions]
    n = report.fix.verification.numerics
    assert n.ok and n.random.startswith("same seed per call; the float64 reference drew eager's own numbers"), n
    assert n.ratio == 1.0 and n.eager_error < 1e-6, n  # from the seed, float64 rand_like was other noise


def test_run_diff_prints_the_verified_edit_as_a_patch_and_the_scripts_output_on_stderr(cli, tmp_path):
    (tmp_path / "models.py").write_text(PRINTING_NET + "        return torch.relu(h)\n")
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\nfrom models import Net\n"
        "model = torch.compile(Net(), backend='eager')\n"
        "for _ in range(3):\n"
        "    model(torch.randn(4, 8))\n"
        "print('trained')\n"
    )
    result = cli("run", "--diff", "--no-bisect", "-q", "--", str(script), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("--- a/models.py\n+++ b/models.py\n") and "trained" not in result.stdout, result.stdout
    assert "+        if not torch.compiler.is_compiling():" in result.stdout and "trained" in result.stderr
    (tmp_path / "p.patch").write_text(result.stdout)
    applied = subprocess.run(["git", "apply", "p.patch"], cwd=tmp_path, capture_output=True, text=True)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "if not torch.compiler.is_compiling():" in (tmp_path / "models.py").read_text()


def test_ddps_own_breaks_are_the_wrappers_expected_and_a_user_break_inside_stays_the_users(cli, tmp_path):
    """Two gloo ranks compiling `DDP(model)`: DDP's skipped `_inside_ddp_forward` and its Logger
    bookkeeping break on every call by design: owner `wrapper`, expected, no suggestion, not in the
    verdict. A print inside the wrapped model's own forward is still the user's break, with its fix."""
    script = tmp_path / "ddp.py"
    script.write_text(
        "import sys, torch, torch.distributed as dist\n"
        "from torch.nn.parallel import DistributedDataParallel as DDP\n"
        "class Net(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = torch.nn.Linear(16, 4)\n"
        "    def forward(self, x):\n"
        "        if len(sys.argv) > 1:\n"
        "            print('forward', x.shape)\n"
        "        return self.fc(x)\n"
        "dist.init_process_group('gloo')\n"
        "ddp = torch.compile(DDP(Net()), backend='eager')\n"
        "for _ in range(3):\n"
        "    ddp(torch.randn(8, 16)).sum().backward()\n"
        "dist.destroy_process_group()\n"
    )
    out = tmp_path / "r.json"
    clean = cli("run", "--nproc", "2", "--no-bisect", "--no-fix", "--json", str(out), "-q", "--", str(script))
    assert clean.returncode == 0, clean.stderr
    report = load_report(out)
    wrapper = [s for s in report.graph_breaks if s.owner == "wrapper"]
    assert len(wrapper) == len(report.graph_breaks) >= 2 and all(s.wrapper == "DistributedDataParallel" and s.expected for s in wrapper)
    assert report.summary.expected_break_sites == len(wrapper) and report.summary.verdict == "clean"
    assert not [s for s in report.suggestions if set(s.applies_to) & {w.id for w in wrapper}]
    assert report.summary.graphs_compiled >= 1  # with the eager backend the model's own graph compiles
    assert next_steps(report)[0].startswith("Nothing of yours to fix: the ")
    mixed = cli("run", "--nproc", "2", "--no-bisect", "--json", str(out), "-q", "--", str(script), "print")
    assert mixed.returncode == 0, mixed.stderr
    report = load_report(out)
    (mine,) = [s for s in report.graph_breaks if s.owner == "user"]
    assert not mine.expected and mine.user_frame.line == 9 and report.summary.verdict == "graph_breaks"
    assert any(mine.id in s.applies_to for s in report.suggestions)
    assert all(s.expected for s in report.graph_breaks if s is not mine)


DDP_SPLIT_SCRIPT = """\
import sys, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
torch.manual_seed(0)
net = torch.nn.Sequential(
    torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 4)
)
dist.init_process_group("gloo")
if len(sys.argv) > 1:  # the usual way: the wrapper compiled
    model = torch.compile(DDP(net, bucket_cap_mb=1), backend="aot_eager")
else:  # the module compiled inside the wrapper: DDPOptimizer splits its graph per gradient bucket
    model = DDP(torch.compile(net, backend="aot_eager"), bucket_cap_mb=1)
for _ in range(12):  # a pace needs 12 steps (reports.verdicts.MIN_PACE_CALLS)
    model(torch.randn(8, 512)).sum().backward()
dist.destroy_process_group()
"""


def test_ddp_optimizers_bucket_splits_are_named_apart_from_breaks_and_compiling_inside_ddp_is_measured(cli, tmp_path):
    """`DDP(torch.compile(model))` on two gloo ranks: DDPOptimizer splits the graph at its 1 MiB buckets
    (2 subgraphs): the report says so, with the bucket cap, as no graph break. The script's globals
    outlive it as under `python script.py` (freed at once, DDP's reducer hung on gloo one run in two).
    For `torch.compile(DDP(model))`, `--compare default,inner` measures compiling inside the wrapper."""
    script = tmp_path / "ddp_split.py"
    script.write_text(DDP_SPLIT_SCRIPT)
    out = tmp_path / "r.json"
    inside = cli("run", "--nproc", "2", "--no-bisect", "--no-fix", "--timeout", "120", "--json", str(out), "--", str(script))
    assert inside.returncode == 0, inside.stderr
    report = load_report(out)
    assert report.run.stopped is None and not [e for e in report.errors if e.phase == "timeout"]  # no hang
    assert not report.graph_breaks and report.summary.verdict == "clean"
    assert {(s.compile_id, s.subgraphs, s.bucket_cap_bytes, s.buckets) for s in report.ddp_splits} == {("0/0", 2, 2**20, 2)}
    assert "DDPOptimizer split graph 0/0 into 2 subgraphs" in inside.stdout and "bucket cap 1 MiB" in inside.stdout
    # the same from a TORCH_TRACE of a plain torchrun, offline: the subgraphs per rank (the cap is not in the trace)
    trace = tmp_path / "trace"
    plain = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", str(script)],
        env={**os.environ, "TORCH_TRACE": str(trace)}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert plain.returncode == 0, plain.stderr
    offline = cli("logs", str(trace), "--json", str(tmp_path / "logs.json"), "-q")
    assert offline.returncode == 0, offline.stderr
    splits = load_report(tmp_path / "logs.json").ddp_splits
    assert sorted((s.compile_id, s.subgraphs) for s in splits) == [("rank0:0/0", 2), ("rank1:0/0", 2)]
    wrapped = cli(
        "run", "--nproc", "2", "--no-bisect", "--no-fix", "--timeout", "120", "--compare", "default,inner",
        "--json", str(out), "-q", "--", str(script), "wrap",
    )  # fmt: skip
    assert wrapped.returncode == 0, wrapped.stderr
    report = load_report(out)
    rows = {r.strategy: r for r in report.comparison}
    assert rows["inner"].error is None and rows["inner"].period_ms and rows["inner"].verdict == "clean"
    # compiling the wrapper compiles no graph at all: DDP's own frames break before any op and its inner
    # forward is skipped, so the model runs eagerly; compiled inside, the model's graphs are compiled
    assert rows["default"].graphs_compiled == 0 and rows["inner"].graphs_compiled >= 1
    eagerly = "Your model ran eagerly: compiling the DistributedDataParallel wrapper compiled no graph"
    assert any(step.startswith(eagerly) for step in next_steps(report))
    assert all(s.owner == "wrapper" for s in report.graph_breaks)
    # the wrapper's breaks priced by the `inner` row: the step it saves (or costs), per step
    saved = round(rows["default"].period_ms - rows["inner"].period_ms, 4)
    for site in report.graph_breaks:
        assert site.cost.latency_ms == saved and site.cost.measured_by.startswith("run --compare: default -> inner"), site.cost
        assert site.cost.graphs_added >= 1


WRONG_UNDER_COMPILE = """
import sys
sys.path.insert(0, {targets!r})
import torch
from accuracy_targets import SixBlocks


class Printing(SixBlocks):
    def forward(self, x):
        print("batch", tuple(x.shape))  # a graph break: the print-guard fix gets checked on a copy
        return super().forward(x)


torch.manual_seed(0)
model = torch.compile(Printing(), backend="eager")
for _ in range(3):
    model(torch.randn(4, 16))
"""


def test_when_every_fix_check_of_a_script_departs_from_float64_the_accuracy_bisection_names_the_module(cli, tmp_path):
    """Block 3 of the script's model computes otherwise under compile: the unchanged copy the fix checks are
    compared with departs from float64, and every fix check alike, so the compile is wrong, not the fixes; as
    for a build() target, the accuracy bisection runs on the script's compiled module and its recorded
    inputs, and names blocks.3."""
    script = tmp_path / "wrong.py"
    script.write_text(WRONG_UNDER_COMPILE.format(targets=str(TARGETS)))
    out = tmp_path / "r.json"
    result = cli("run", "--json", str(out), "--", str(script))
    assert result.returncode == ExitCode.OK, result.stderr
    report = load_report(out)
    # the unchanged copy, compiled on the script's kept calls, already departs: that is the compile, not a fix
    assert report.fix.baseline is not None and report.fix.baseline.numerics_ok is False
    checks = [s.verified for s in report.suggestions if s.verified is not None and s.verified.applied]
    assert checks and all(v.numerics_ok is False for v in checks) and not report.fix.applied, checks
    assert report.summary.wrong_results and report.summary.wrong_results.startswith("the compiled module, unchanged: error ")
    assert report.accuracy is not None and report.accuracy.module_path == "blocks.3", report.accuracy
    assert "`blocks.3` (Block) diverges compiled alone" in report.summary.wrong_results
