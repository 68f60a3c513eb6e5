"""Stage 5: how every figure is measured, one module per concern. `registry` (the metric names, units
and meanings), `stats` and `objective` (what a unit did, what a sweep ranks by) are torch-free; the rest
run in the worker."""
