"""`ctc-doctor sweep`: the doctor over a fleet of models, sharded across machines, diffed across sweeps.

Each target of a manifest runs in its own `ctc-doctor` child process (a crash, hang or import error
costs that target one row); the parent reads the children's JSON reports into one `summary.json` and
`summary.md`. No torch import here: the parent stays light, whatever the children load.
"""
