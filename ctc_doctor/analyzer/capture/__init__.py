"""Watching torch while the user's code runs: the live capture core (`live`: the eager and compiled
passes, findings), module attribution (`attribution`: call sites, code ownership), module inputs for
bisection (`inputs`), and what an unmodified script compiles (`compiles`). Reading what torch wrote
is the torch-free `readers`' job."""
