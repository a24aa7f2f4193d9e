"""Everything that runs torch (and the torch-free readers of what torch wrote). Returns Report objects.

Layers, each importing only those below it (import-linter contracts in pyproject.toml check this):
- entry points: `pipeline` (`analyze()`: phase order, options, deadlines, progress; it alone writes the
  report), `offline` (`ctc-doctor logs`), `trial_worker` (the child process that serves isolated bisection trials), then `target`
  (TARGET -> Workload);
- `phases`: analysis, bisect, suggest, fix, probe, bench, each `run_<phase>(context[, options]) -> section`;
  they do not import one another;
- `capture`: what watches torch (the live eager/compiled passes and their findings, attribution, module
  inputs) and reads what it wrote (parsing, the graph-break registry, log files);
- `common`: the shared floor every layer above may use, including `torch_internals`, the one module
  that touches torch's private APIs.
"""
