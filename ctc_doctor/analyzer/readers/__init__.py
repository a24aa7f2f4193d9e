"""Torch-free readers of what torch.compile wrote, shared by the live capture and `ctc-doctor logs`.

- parsing: graph-break messages and guard-failure reasons (text); gb_registry: torch's graph-break
  registry, read from the installed package without importing torch
- findings: report entries from raw compile events; causes: recompile events folded into causes;
  compile_time: what compiling and each recompile cause cost (seconds by phase, recurrence, cliffs)
- logfiles: streaming readers of TORCH_TRACE files and TORCH_LOGS text
- sources: where a file lives (own code, a library, torch); text: one-line errors, guard counts
- notes: counted records (warnings, torch's log records) folded into report notes

An import-linter contract forbids torch here (and in `offline` and the suggestion rules), so
`ctc-doctor logs` never imports torch.
"""
