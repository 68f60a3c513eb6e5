"""Hydra-configured torch.compile training sweeps, measured in isolated workers, logged to MLflow."""
