"""Parts of the terminal summary, apart from `reports.render` (torch-free, rich only)."""
