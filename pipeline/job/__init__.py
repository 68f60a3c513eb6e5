"""Stages 2 and 3: one job. Its parent process (`preflight`, `parent`, with `supervisor`, `signals`,
`progress`, `gpu_pool`, `outcome`) and the worker process it starts (`worker`), joined by the job
folder (`pipeline.jobdir`) and the result file (`result`)."""
