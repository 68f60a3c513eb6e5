"""Stage 1 of a job: the typed config (`schema`, its fields declared with `fields.doc`), its own checks
(`checks`), one-line errors (`errors`, `compose` for Hydra's), library checks remembered once passed
(`known_good`; the checks themselves are the job's preflight) and docs/reference.md's tables
(`reference`). Nothing here imports torch at import time."""
