"""What the doors share: `session` (one run as one object: settings, clock, cost account, what a phase
lends the next), `own_cost` (the run's cost meter and the preflight before each phase) and `target`
(TARGET -> Workload, on real or meta tensors); over the session, `twin` (a small real twin run in place of a
run without the weights that stopped)."""
