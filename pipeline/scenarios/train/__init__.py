"""The training scenario: `config.py` (its settings, torch-free) and `scenario.py` (the training step, measured)."""
