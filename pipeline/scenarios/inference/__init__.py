"""The inference scenario: `config.py` (its settings, torch-free) and `scenario.py` (forward calls, measured)."""
