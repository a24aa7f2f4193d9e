"""Everything that runs torch (and the torch-free readers of what torch wrote). Returns Report objects.

Layers, each importing only those below it (import-linter contracts in pyproject.toml check this):
- `doors`: how a run comes in: `pipeline` (`analyze()`, and `later_phases`, the one door to what
  follows an analysis), `launch`, `script_runner`, `torchrun` and `script_report` (`ctc-doctor run`),
  `offline` (`ctc-doctor logs`); beside them `workers`, the child processes' entry points (`trial`:
  isolated bisection trials, `bench`: isolated benchmark arms);
- `services`: what the doors share: `twin` (a real twin after a stop without the weights), `session` (one
  run as one object), `own_cost` (its cost account), `target` (TARGET -> Workload);
- `phases`: analysis, bisect, suggest, fix, probe, bench, each `run_<phase>(context[, options]) -> section`;
  they do not import one another;
- `triage`: PyTorch's own failures, narrowed and written up ready to file;
- `capture`: what watches torch (the live eager/compiled passes and their findings, attribution, module
  inputs, what a script compiles);
- `fixes`: a copy of the model with fix actions applied, and the facts the rules read;
- `running` (calling the user's code) over `torch_internals` (the one place that touches torch's
  private APIs: the reference one module at a time asks it whether a backward is running);
- `readers`: torch-free readers of what torch wrote (parsing, findings, causes, log files), which
  `offline` and the suggestion rules share without importing torch.
"""
