"""The click options the commands share, and one typed conversion of what they parsed into the
analyzer's option objects (`AnalysisArgs`, `RunArgs`, `GateArgs`): no command reads a string-keyed dict.

Nothing here imports torch or the analyzer at import time (`--help` stays fast): the conversions
import the option classes when they run.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..vocabulary import ARMS, BENCH_MODES, MODES, STRATEGIES, listed
from . import supervise

if TYPE_CHECKING:
    from ..analyzer.doors.launch import RunOptions
    from ..analyzer.doors.pipeline import AnalyzeOptions
    from ..analyzer.phases.bench import BenchOptions
    from ..analyzer.phases.bisect import BisectOptions
    from ..analyzer.phases.bisect.accuracy import AccuracyOptions
    from ..analyzer.phases.fix import FixOptions
    from ..progress import ProgressFn
    from ..reports.models import Strategy
    from ..reports.policy import Policy

F = TypeVar("F", bound=Callable[..., Any])
A = TypeVar("A")

REDACT_HELP = "Make every absolute path project-relative, <site-packages>, <stdlib>, ~ or <abs>/last/two, and drop user and host names."


# options several commands declare alike
GUARDS = click.option("--guards", "keep_guards", is_flag=True, help="Keep the full guard tree text per compile id in the report.")
TOP = click.option("--top", default=10, show_default=True, type=int, help="Break sites to show in the summary.")
REDACT = click.option("--redact", is_flag=True, help=REDACT_HELP)


def report_output(quiet: str, tui: str) -> list[Any]:
    """What the report shows and where, alike in the commands that make one (`--guards`, `--top`,
    `--redact`, `--quiet`, `--tui`); each command says what quiet and the TUI mean for it."""
    return [GUARDS, TOP, REDACT, click.option("--quiet", "-q", is_flag=True, help=quiet), click.option("--tui", is_flag=True, help=tui)]


DEBUG = click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
# the TUI's live mode: one JSON object per progress step on this file descriptor
PROGRESS_FD = click.option("--progress-fd", type=int, default=None, hidden=True)


def decorate(f: F, options: list[Any]) -> F:
    """Apply click options so they show in --help in list order."""
    for option in reversed(options):
        f = option(f)
    return f


def option_group(options: list[Any], full_run_first: Any = None, full_run: bool = False) -> Callable[[F], F]:
    """A decorator applying `options`; the full run (`analyze`, `demo`) gets `full_run_first` before them."""
    chosen = [full_run_first, *options] if full_run and full_run_first is not None else options
    return lambda f: decorate(f, chosen)


def count_option(*names: str, help: str, minimum: int = 1) -> Any:
    """An option that takes a count N (`minimum` or more), unset by default."""
    return click.option(*names, type=click.IntRange(min=minimum), default=None, metavar="N", help=help)


def amount_option(name: str, dest: str, help: str) -> Any:
    """An option that takes SECONDS (`dest` ending in `_s`: a positive number) or MB (a positive integer)."""
    if dest.endswith("_s"):
        return click.option(name, dest, default=None, type=click.FloatRange(min=0, min_open=True), metavar="SECONDS", help=help)
    return click.option(name, dest, default=None, type=click.IntRange(min=1), metavar="MB", help=help)


BUDGET = amount_option(
    "--budget",
    "budget_s",
    "Plan the run to fit in about this long: the analysis (a script's own run) and the eager and compiled arms always "
    "run; the fix checks, bisection trials and optional arms that would not fit are left out and named in the report.",
)
MEMORY_LIMIT = amount_option(
    "--memory-limit",
    "memory_limit_mb",
    "What the doctor may hold on the device beyond what the workload itself holds (its model and activations) "
    "[default: what is free]: phases adapt (copies share the weights, the float64 reference goes block by block or in "
    "slices) or are left out, and said; an arm past eager and compiled that needs more runs out of memory within it; "
    "exit 14 only when the analysis itself holds more.",
)


def analysis_options(f: F) -> F:
    options = [
        click.option(
            "--json", "json_out", metavar="PATH", help="Write the JSON report to PATH ('-' for stdout; the summary then goes to stderr)."
        ),
        click.option("--train", is_flag=True, help="Run forward+backward (loss from Workload.loss_fn, else the sum of the outputs)."),
        click.option(
            "--backend",
            default=None,
            help="torch.compile backend [default: eager; aot_eager with --train]. 'inductor' also yields perf hints.",
        ),
        click.option("--device", default=None, help="Move the model and inputs to this device first (e.g. cuda)."),
        click.option("--seed", default=0, show_default=True, type=int, help="torch.manual_seed before building and before each phase."),
        click.option(
            "--weights",
            type=click.Choice(["real", "none"]),
            default="real",
            show_default=True,
            help="none: build the model on the meta device (no memory for its weights) and diagnose its compile from Dynamo "
            "alone: breaks, graphs, recompiles, causes, bisection; the run stops at a line that needs real values (exit 15), "
            "unless a 2-layer real twin of a model built from a config can run instead (its findings, labelled). "
            "The fix checks, the benchmark and the accuracy bisection need the weights: left out.",
        ),
        click.option("--no-twin", is_flag=True, help="With --weights none: no real twin after a stop; the stop is the answer (exit 15)."),
        amount_option("--timeout", "timeout_s", "Give up after this long; the partial report is still written."),
        BUDGET,
        MEMORY_LIMIT,
        click.option("--no-explain", is_flag=True, help="Skip the torch._dynamo.explain cross-check."),
        *report_output(
            quiet="No summary or progress.",
            tui="Watch the run in the terminal UI (phases, output; Escape cancels), then browse the report.",
        ),
        DEBUG,
        PROGRESS_FD,
    ]
    return decorate(f, options)


REPRO_DIR = click.option(
    "--repro-dir",
    default=None,
    metavar="DIR",
    help="Write repro scripts here [default: beside the --json report; none without one].",
)


def bisect_options(default_strategy: str, full_run: bool) -> Callable[[F], F]:
    return option_group(
        [
            click.option(
                "--strategy",
                type=click.Choice(["top-down", "bottom-up", "both"]),
                default=default_strategy,
                show_default=True,
                help="Bisection strategy (both: run the two and report whether they agree).",
            ),
            count_option("--max-trials", help="Run at most N fullgraph trials; the rest is listed as untried."),
            click.option(
                "--trial-timeout",
                "trial_timeout_s",
                type=float,
                default=60.0,
                show_default=True,
                metavar="SECONDS",
                help="Per-trial limit; a hung trial becomes a timeout row.",
            ),
            click.option(
                "--isolate/--no-isolate",
                default=None,
                help="Run the trials in a child process (a segfault costs one row) "
                "[default: on for a full run with the benchmark on CPU, where it costs under 10 %; off otherwise].",
            ),
            click.option("--no-memo", is_flag=True, help="Try every module, even identical ones."),
            REPRO_DIR,
        ],
        click.option("--no-bisect", is_flag=True, help="Do not bisect the module tree when breaks are found."),
        full_run,
    )


def fix_options(full_run: bool) -> Callable[[F], F]:
    return option_group(
        [
            click.option(
                "--fix-backend",
                default=None,
                metavar="BACKEND",
                help="Compile the verified fixes once more on this backend, the one you run, before they are recommended "
                "[default: the --bench-backend, else inductor; 'none' skips it].",
            ),
            click.option(
                "--probe-shapes",
                is_flag=True,
                help="Vary each input dimension to find the ones that recompile; recommend mark_dynamic calls.",
            ),
            click.option(
                "--diff",
                "print_diff",
                is_flag=True,
                help="Print the verified source edits as one patch on stdout (`git apply` / `patch -p1` from the "
                "repository root); the other fixes as snippets on stderr.",
            ),
            click.option(
                "--write",
                is_flag=True,
                help="Make the verified source edits in your files (never an installed package's; refused, exit 13, "
                "when a file changed since the analysis).",
            ),
        ],
        click.option("--no-fix", is_flag=True, help="Do not apply and verify the auto-applicable suggestions."),
        full_run,
    )


def bench_options(full_run: bool) -> Callable[[F], F]:
    return option_group(
        [
            click.option("--bench-backend", default="inductor", show_default=True, help="Backend of the benchmark's compiled arms."),
            click.option(
                "--mode",
                type=click.Choice(BENCH_MODES),
                default="default",
                show_default=True,
                help="torch.compile mode of the benchmark (inductor).",
            ),
            click.option(
                "--iters",
                type=click.IntRange(min=1),
                default=None,
                help="Timed passes per arm (one pass = every call of the workload) [default: adaptive, 5 to 100 passes "
                "until the median is known within 2 %, about 5 s of timing per arm at most].",
            ),
            click.option("--warmup", type=click.IntRange(min=0), default=3, show_default=True, help="Untimed passes before timing."),
            click.option("--no-regional", is_flag=True, help="No regional-compilation arm, even with repeated blocks."),
            click.option(
                "--aot",
                is_flag=True,
                help="Add the ahead-of-time arms: torch.export + AOTInductor of the whole model (aot), "
                "of each repeated block class (aot_regional), of the fixed copy (aot_fixed).",
            ),
            click.option("--aot-strict", is_flag=True, help="Export the AOT arms in strict mode (Dynamo traces) [default: non-strict]."),
            click.option(
                "--objective",
                type=click.Choice(["balanced", "latency", "compile"]),
                default="balanced",
                show_default=True,
                help="What the best arm and the ranking of suggestions optimise; balanced: never first a change that makes latency worse.",
            ),
            _list_option(
                "--modes",
                _checked_modes,
                f"More inductor modes, one benchmark arm each (comma-separated: {listed(MODES)}); CUDA-graph modes belong on a GPU.",
            ),
            click.option(
                "--shape-arms",
                is_flag=True,
                help="When the calls' shapes vary, add the arms dynamic (dynamic=True) and marked (mark_dynamic on every "
                "varying dim) beside compiled (torch's automatic dynamic shapes).",
            ),
            _list_option(
                "--arms",
                _checked_arms,
                f"Measure only these optional arms beside eager and compiled (comma-separated: {listed(ARMS)}), "
                "or add to the default arms with a `+` (`+compiled_optimizer`: training steps leave it out by default) "
                "[default: every arm that applies]; each compiled arm costs a cold compile.",
            ),
            click.option(
                "--isolate-arms/--no-isolate-arms",
                default=True,
                show_default=True,
                help="Run the arms in a child process that rebuilds TARGET, so a crash in one (a segfault, an abort) "
                "costs that arm, not the run; off: in this process.",
            ),
            amount_option(
                "--arm-memory-limit",
                "arm_memory_mb",
                "Cap each arm's memory (the arms' child process's heap on the host; its share of the GPU on CUDA): "
                "an arm that needs more fails as out of memory and the others are still measured.",
            ),
            count_option(
                "--steps",
                "job_steps",
                help="The length of your job in calls (training steps): also name the arm with the least total time "
                "(compile + N calls) for it.",
            ),
        ],
        click.option("--no-bench", is_flag=True, help="Skip the benchmark (inductor compiles take a while on CPU)."),
        full_run,
    )


def _list_option(name: str, check: Callable[[str | None], str | None], help: str) -> Callable[[F], F]:
    """A comma-separated option (`--modes`, `--arms`), checked by `check` when parsed."""
    return click.option(name, default=None, metavar="LIST", callback=lambda ctx, param, value: check(value), help=help)


def _checked_arms(value: str | None) -> str | None:
    """`--arms`: known optional arms, comma-separated, each either alone (measure only these) or after a `+`
    (add it to the default arms), not both; an unknown one is a usage error (exit 2)."""
    names = [n.strip() for n in (value or "").split(",") if n.strip()]
    added = [n.startswith("+") for n in names]
    if any(added) and not all(added):
        raise click.BadParameter(
            "either name the arms to measure (compiled_fixed,regional) or add arms to the default ones (+compiled_optimizer), not both"
        )
    known = tuple(f"+{a}" for a in ARMS) if any(added) else tuple(ARMS)
    return _checked_list(value, known, "arm", f" (arms: {', '.join(ARMS)}; eager and compiled always run)")


def _adds(value: str | None) -> bool:
    """`--arms +name,...`: the arms named are added to the default ones."""
    return bool(value) and all(n.strip().startswith("+") for n in (value or "").split(",") if n.strip())


def _checked_modes(value: str | None) -> str | None:
    """`--modes`: known inductor modes, comma-separated, each once; an unknown one is a usage error (exit 2)."""
    return _checked_list(value, tuple(MODES), "mode", f"; choose from {', '.join(MODES)}")


def _names(value: str | None) -> tuple[str, ...]:
    """A list option's value (`--modes`, `--arms`, checked when parsed) as a tuple."""
    return tuple(n for n in (value or "").split(",") if n)


def _checked_list(value: str | None, known: tuple[str, ...], what: str, hint: str) -> str | None:
    """A comma-separated option's names, each once; an unknown one is a usage error (exit 2), `hint` after it."""
    if not value:
        return None
    names = list(dict.fromkeys(n.strip() for n in value.split(",") if n.strip()))
    unknown = [n for n in names if n not in known]
    if unknown:
        raise click.BadParameter(f"unknown {what} {', '.join(unknown)}{hint}")
    return ",".join(names)


GATE_OPTIONS = [
    count_option("--max-graph-breaks", help="Fail when more than N break sites remain after the allowlists [default: 0].", minimum=0),
    count_option("--max-recompiles", help="Fail when more than N recompiles happen [default: 0].", minimum=0),
    click.option("--allow", multiple=True, metavar="GB|TYPE", help="Do not count breaks with this GB id or gb_type (repeatable)."),
    click.option("--allow-module", multiple=True, metavar="PATH", help="Do not count breaks inside this module path (repeatable)."),
    click.option("--own-code-only", is_flag=True, help="Do not count breaks whose innermost frame is in a library."),
]


def parsed_as(cls: type[A], kw: dict[str, Any], *, all_of_them: bool = True) -> A:
    """A command's parsed options (click's keyword arguments) as `cls`: the entries of kw that name its
    fields, popped from kw. With `all_of_them`, an entry left over is a bug: an option the command
    declares that no field receives (tests/test_cli.py checks every command's options against the
    fields before any run)."""
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    args = cls(**{name: kw.pop(name) for name in list(kw) if name in names})
    if all_of_them and kw:
        raise TypeError(f"options without a field in {cls.__name__}: {sorted(kw)}")
    return args


@dataclass(frozen=True)
class GateArgs:
    """The CI gate's options (`check`, `run --check`)."""

    max_graph_breaks: int | None = None
    max_recompiles: int | None = None
    allow: tuple[str, ...] = ()
    allow_module: tuple[str, ...] = ()
    own_code_only: bool = False

    def policy(self, *, gate: bool) -> Policy | None:
        """The check policy; None when no gate was asked for (neither `gate` nor a limit)."""
        from ..reports.policy import Policy

        if not gate and (self.max_graph_breaks, self.max_recompiles) == (None, None):
            return None
        # a gate's default is clean: a limit left unset stays 0 when the other is given
        return Policy(
            max_graph_breaks=self.max_graph_breaks or 0,
            max_recompiles=self.max_recompiles or 0,
            allow=self.allow,
            allow_modules=self.allow_module,
            own_code_only=self.own_code_only,
        )


@dataclass(frozen=True)
class AnalysisArgs:
    """What analyze, fix, bench, bisect, demo and check parsed; an option a command lacks keeps its default."""

    json_out: str | None = None
    train: bool = False
    backend: str | None = None
    device: str | None = None
    seed: int = 0
    weights: str = "real"
    no_twin: bool = False
    timeout_s: float | None = None
    budget_s: float | None = None
    memory_limit_mb: int | None = None
    no_explain: bool = False
    keep_guards: bool = False
    top: int = 10
    redact: bool = False
    quiet: bool = False
    tui: bool = False
    debug: bool = False
    progress_fd: int | None = None
    # the bisection
    no_bisect: bool = False
    strategy: Strategy = "top-down"
    max_trials: int | None = None
    trial_timeout_s: float | None = 60.0
    isolate: bool | None = None
    no_memo: bool = False
    repro_dir: str | None = None
    # the verified fixes
    no_fix: bool = False
    fix_backend: str | None = None
    probe_shapes: bool = False
    print_diff: bool = False
    write: bool = False
    # the benchmark: a command without its options has no bench_backend
    no_bench: bool = False
    bench_backend: str | None = None
    mode: str = "default"
    iters: int | None = None
    warmup: int = 3
    no_regional: bool = False
    aot: bool = False
    aot_strict: bool = False
    objective: str = "balanced"
    job_steps: int | None = None
    shape_arms: bool = False
    modes: str | None = None
    arms: str | None = None
    isolate_arms: bool = True
    arm_memory_mb: int | None = None
    # what the command itself decides
    bisect_only: bool = False
    """`bisect`: the bisection alone, whether or not the model breaks."""
    rebuild_spec: str | None = None
    """The TARGET a child process rebuilds the model from (`demo` names its fixture's)."""

    def for_bench(self, spec: str) -> BenchOptions | None:
        """The benchmark's options; None when the command runs no benchmark."""
        if self.no_bench or self.bisect_only or self.bench_backend is None:
            return None
        from ..analyzer.phases.bench import BenchOptions

        return BenchOptions(
            backend=self.bench_backend,
            mode=None if self.mode == "default" else self.mode,
            iters=self.iters,
            warmup=self.warmup,
            regional=not self.no_regional,
            objective=self.objective,
            aot=self.aot,
            aot_strict=self.aot_strict,
            job_steps=self.job_steps,
            shape_arms=self.shape_arms,
            modes=_names(self.modes),
            arms=() if _adds(self.arms) else _names(self.arms),
            add_arms=tuple(n.removeprefix("+") for n in _names(self.arms)) if _adds(self.arms) else (),
            isolate=self.isolate_arms,
            target=self.rebuild_spec or spec,
            arm_memory_mb=self.arm_memory_mb,
            memory_limit_mb=self.memory_limit_mb,
            stage=os.environ.get(supervise.STAGE) if self.isolate_arms else None,
            repro_dir=self.repro_folder(),
        )

    def isolate_trials(self, with_bench: bool) -> bool:
        """--isolate/--no-isolate when given; else on for a run with the benchmark on CPU, where the child,
        started before the analysis, costs under 10 % of the run (`benchmarks/bisect_cost.py --full-run`)."""
        if self.isolate is not None:
            return self.isolate
        return with_bench and self.device in (None, "cpu")

    def for_bisect(self, spec: str, with_bench: bool) -> BisectOptions | None:
        """The bisection's options; None when the command runs none."""
        if not self.bisect_only and self.no_bisect:
            return None
        from ..analyzer.phases.bisect import BisectOptions

        repro_dir = self.repro_folder()
        return BisectOptions(
            strategy=self.strategy,
            max_trials=self.max_trials,
            trial_timeout_s=self.trial_timeout_s if self.trial_timeout_s and self.trial_timeout_s > 0 else None,
            isolate=self.isolate_trials(with_bench),
            memoize=not self.no_memo,
            repro_dir=repro_dir,
            target=self.rebuild_spec or spec,
            always=self.bisect_only,
        )

    def repro_folder(self) -> str | None:
        """Where repro scripts go: --repro-dir, else beside the --json report (None without either)."""
        json_out = self.json_out
        return self.repro_dir or (os.path.dirname(os.path.abspath(json_out)) if json_out and json_out != "-" else None)

    def fix_options(self) -> FixOptions:
        """The fix phase's options: the verified set is compiled once more on the user's backend (`--fix-backend`,
        else the benchmark's with its mode, else inductor; `none`: not)."""
        from ..analyzer.phases.fix import FixOptions

        backend = self.fix_backend or self.bench_backend or "inductor"
        mode = self.mode if self.mode != "default" and backend == (self.bench_backend or "inductor") else None
        return FixOptions(
            repro_dir=self.repro_folder(),
            user_backend=None if backend == "none" else backend,
            user_compile={"mode": mode} if mode and backend == "inductor" else {},
        )

    def for_accuracy(self, spec: str) -> AccuracyOptions | None:
        """The accuracy bisection's options (it runs when a compiled run fails the numerics check)."""
        if self.bisect_only:
            return None
        from ..analyzer.phases.bisect.accuracy import AccuracyOptions

        return AccuracyOptions(
            max_trials=self.max_trials or AccuracyOptions.max_trials,
            trial_timeout_s=self.trial_timeout_s if self.trial_timeout_s and self.trial_timeout_s > 0 else None,
            memoize=not self.no_memo,
            repro_dir=self.repro_folder(),
            target=self.rebuild_spec or spec,
        )

    def analyze_options(self, spec: str, progress: ProgressFn) -> AnalyzeOptions:
        """The analyzer's options for TARGET `spec`, reporting progress to `progress`."""
        from ..analyzer.doors.pipeline import AnalyzeOptions

        bench = self.for_bench(spec)
        return AnalyzeOptions(
            fix=None if self.no_fix or self.bisect_only else self.fix_options(),
            probe_shapes=self.probe_shapes,
            bench=bench,
            backend=self.backend,
            device=self.device,
            train=self.train,
            seed=self.seed,
            weights=self.weights,
            twin=not self.no_twin,
            explain=not self.no_explain,
            keep_guard_text=self.keep_guards,
            timeout_s=self.timeout_s,
            budget_s=self.budget_s,
            memory_limit_mb=self.memory_limit_mb,
            compile=not self.bisect_only,
            bisect=self.for_bisect(spec, bench is not None),
            accuracy=self.for_accuracy(spec),
            spec=spec,
            command=" ".join(["ctc-doctor", *sys.argv[1:]]),
            progress=progress,
            owns_workload=True,
            catch_signals=True,
            resume=bench is not None and bench.stage is not None and supervise.RESUME in os.environ,
        )


@dataclass(frozen=True)
class RunArgs:
    """What `ctc-doctor run` parsed (the gate's options apart, in GateArgs)."""

    nproc: int = 1
    backend: str | None = None
    max_steps: int | None = None
    timeout_s: float | None = None
    json_out: str | None = None
    no_bisect: bool = False
    no_fix: bool = False
    keep_guards: bool = False
    top: int = 10
    redact: bool = False
    quiet: bool = False
    tui: bool = False
    gate: bool = False
    debug: bool = False
    progress_fd: int | None = None
    compare: str | None = None
    print_diff: bool = False
    write: bool = False
    budget_s: float | None = None
    memory_limit_mb: int | None = None
    repro_dir: str | None = None

    def strategies(self) -> list[str]:
        """`--compare`'s strategies, in the order given (eager first when it is among them); a name
        that is not one fails in one line (usage error)."""
        if self.compare is None:
            return []
        names = list(dict.fromkeys(n.strip() for n in self.compare.split(",") if n.strip()))
        unknown = [n for n in names if n not in STRATEGIES]
        if unknown or not names:
            raise click.UsageError(f"--compare: unknown strategy {', '.join(unknown) or '(none)'}; choose from {', '.join(STRATEGIES)}")
        names += [] if "default" in names else ["default"]  # the run itself: the script as written
        return sorted(names, key=lambda n: (n != "eager", n != "default"))

    def run_options(self, *, gated: bool) -> RunOptions:
        """The launcher's options; a gated run skips the bisection and the fixes (counts are all it needs)."""
        from ..analyzer.doors.launch import RunOptions

        return RunOptions(
            nproc=self.nproc,
            backend=self.backend,
            max_steps=self.max_steps,
            timeout_s=self.timeout_s,
            bisect=not self.no_bisect and not gated,
            fix=not self.no_fix and not gated,
            keep_guard_text=self.keep_guards,
            compare=self.compare is not None,
            budget_s=self.budget_s,
            memory_limit_mb=self.memory_limit_mb,
            repro_dir=self.repro_dir
            or (os.path.dirname(os.path.abspath(self.json_out)) if self.json_out and self.json_out != "-" else None),
        )
