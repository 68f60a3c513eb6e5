"""Hydra launcher plugins of this project (Hydra only loads launchers from the `hydra_plugins`
namespace package): its submitit launchers, tolerant of jobs that die without a result."""
