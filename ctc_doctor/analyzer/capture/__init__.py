"""Watching torch: the live capture core (`live`: the eager and compiled passes, findings), module
attribution (`attribution`: call sites, code ownership), module inputs for bisection (`inputs`),
and reading what torch wrote (`parsing`, `findings`, `gb_registry`, and `logfiles` for runs on disk).
`parsing`, `findings`, `gb_registry` and `logfiles` are torch-free: offline ingestion uses them."""
