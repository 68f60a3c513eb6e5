"""Stage 7: the sweep. `callbacks` (its parent run, at multirun start and end), `state` (sweep.json,
read by the jobs), `summary` (rows and aggregates), `render` and `plots` (the summary as text and
PNG), `finish` (closing a sweep), `sync` (results MLflow never got). Nothing here imports torch."""
