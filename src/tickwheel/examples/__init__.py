"""Small real jobs that the example definitions in ``examples/definitions`` point at."""
