"""One screen per section of the report, plus help, filter, error and the live run."""
