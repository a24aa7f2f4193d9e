"""Everything that runs torch (and the torch-free readers of what torch wrote). Returns Report objects.

Layers, each importing only those below it (import-linter contracts in pyproject.toml check this):
- entry points: `launch`, `script_runner`, `torchrun` (`ctc-doctor run`), `script_report`, then
  `pipeline` (`analyze()`: phase order, options, deadlines, progress), `offline` (`ctc-doctor logs`),
  `trial_worker` and `bench_worker` (the child processes of isolated bisection trials and benchmark
  arms), then `target` (TARGET -> Workload);
- `phases`: analysis, bisect, suggest, fix, probe, bench, each `run_<phase>(context[, options]) -> section`;
  they do not import one another;
- `capture`: what watches torch (the live eager/compiled passes and their findings, attribution, module
  inputs, what a script compiles);
- `fixes`: a copy of the model with fix actions applied, and the facts the rules read;
- `running` (calling the user's code) beside `torch_internals` (the one place that touches torch's
  private APIs);
- `readers`: torch-free readers of what torch wrote (parsing, findings, causes, log files), which
  `offline` and the suggestion rules share without importing torch.
"""
