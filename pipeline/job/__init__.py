"""Stage 2 and 3: one job. Its parent process (`parent`, with `supervisor`, `signals`, `progress`,
`gpu_pool`) and the worker process it spawns (`worker`), joined by the result file (`result`)."""
