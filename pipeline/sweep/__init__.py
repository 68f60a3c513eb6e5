"""Stage 7: the sweep. `callbacks` (its parent run, at multirun start and end), `state` (its axes and
planned jobs, from Hydra), `summary` (rows and aggregates), `verdict`, `render` and `plots` (the summary
as text and PNG), `finish` (closing a sweep), `sync` (results MLflow never got), `view` (the UI's saved
view). What jobs know of their sweep is `pipeline.sweep_context`. Nothing here imports torch."""
