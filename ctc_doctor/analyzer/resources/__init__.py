"""The doctor's own resources: what a phase will need in memory before it starts (`preflight`), what the
run cost per phase against the workload's own (`meter`), and whether other work shared the machine while
the benchmark timed its arms (`load`). Above `running` (which gives memory back and reads free memory),
below the phases and the capture that use them."""
