"""Stage 5: how every figure is measured, one module per concern. `registry` (the metric names, units
and meanings) and `stats` are torch-free; the rest run in the worker."""
