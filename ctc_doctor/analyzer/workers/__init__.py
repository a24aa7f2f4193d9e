"""The child processes' entry points, each started as `python -m ctc_doctor.analyzer.workers.NAME SETUP.json`:
`trial` (isolated bisection trials) and `bench` (isolated benchmark arms). Both rebuild the workload from
its target and serve requests over `running.worker`'s protocol."""
