"""Stage 1 of a job: the typed config (`schema`), its checks (`checks`), one-line errors (`errors`),
checks remembered once passed (`known_good`) and the README's config reference (`reference`).
Nothing here imports torch at import time."""
