"""How a run comes in: each door makes a report and hands the later phases to the same code.

- `pipeline`: `analyze()`, a build() target's run (the CLI's `analyze`, `bisect`, `fix`, `bench`, the
  pytest plugin), and `later_phases`, the one door every producer goes through after its analysis;
- `launch` (`ctc-doctor run`'s parent, no torch), `script_runner` (the script's process), `torchrun`
  (torch.distributed.run, quiet when stopped) and `script_report` (one rank's report, then `later_phases`);
- `offline`: `ctc-doctor logs`, torch-free.
"""
