"""Make the config checks a job remembers once passed (pipeline/config/known_good.py) for the given overrides,
as a user's earlier sweeps would have, so no timed sweep pays them on its first job.

Usage: python3 benchmarks/gpu/warm_checks.py model=vit_b16 precision=fp32 compile.mode=eager
"""

import sys
from pathlib import Path

from hydra import compose, initialize_config_dir

from pipeline.config.known_good import cache_file
from pipeline.config.schema import register_configs
from pipeline.job.preflight import validate

register_configs()
with initialize_config_dir(config_dir=str(Path(__file__).resolve().parents[2] / "conf"), version_base="1.3"):
    validate(compose("config", overrides=sys.argv[1:]))
print(f"config checks passed and remembered in {cache_file()}")
