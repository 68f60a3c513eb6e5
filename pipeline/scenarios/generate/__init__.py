"""The generation scenario: `config.py` (its settings, torch-free) and `scenario.py` (prefill and decode, measured)."""
