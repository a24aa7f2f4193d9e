"""The phases of an analysis, one room each: `run_<phase>(context[, options]) -> section`.

- analysis: the compiled run under capture, the eager pass, explain's view of the same run -> findings
- bisect: fullgraph trials over the module tree -> the smallest failing modules, repro scripts
- suggest: rules over the findings -> ranked suggestions (also used offline)
- fix: the auto-applicable suggestions on a copy, re-checked through the live capture -> verifications
- probe: each input dimension grown -> which recompile, verified `mark_dynamic` calls
- bench: eager vs compiled vs fixed vs regional arms -> measured latency, compile time, memory

A phase reads the context (the workload, the run settings, the report so far) and returns its
section; the pipeline merges sections into the report. Phases do not import one another (an
import-linter contract says so): what they share is in the rooms below them (`capture`, `fixes`, `running`, `readers`).
"""
