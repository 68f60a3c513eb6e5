"""SLURM's signals in a submitit job: the job ends its run KILLED with the reason, whenever they come."""

from __future__ import annotations

import os
import signal

import pytest

from pipeline.job.signals import SchedulerSignal, SchedulerSignals


@pytest.fixture
def in_submitit(monkeypatch):
    monkeypatch.setenv("SUBMITIT_EXECUTOR", "slurm")


def _deliver(signum: int) -> None:
    os.kill(os.getpid(), signum)


def test_a_signal_while_the_job_starts_stops_it_when_the_worker_would_start(in_submitit):
    signals = SchedulerSignals()
    with signals.installed():
        _deliver(signal.SIGTERM)  # e.g. scancel while the job imports and opens its MLflow run
        assert signals.received and signals.received.startswith("SIGTERM")
        with (
            pytest.raises(SchedulerSignal, match="SIGTERM: the scheduler stopped the job"),
            signals.interruptible(),
        ):
            pytest.fail("the worker must not start after the scheduler stopped the job")


def test_a_signal_while_the_worker_runs_raises_at_once(in_submitit):
    signals = SchedulerSignals()
    with (
        signals.installed(),
        pytest.raises(SchedulerSignal, match=r"SIGUSR2: .*time limit is near"),
        signals.interruptible(),
    ):
        _deliver(signal.SIGUSR2)
        pytest.fail("SchedulerSignal should have been raised")


def test_a_signal_while_the_result_is_logged_is_only_remembered(in_submitit):
    signals = SchedulerSignals()
    with signals.installed():
        with signals.interruptible():
            pass
        _deliver(signal.SIGTERM)  # after the worker: logging the result must complete
        assert signals.received.startswith("SIGTERM")


def test_handlers_are_restored_and_untouched_outside_submitit(monkeypatch):
    monkeypatch.delenv("SUBMITIT_EXECUTOR", raising=False)
    before = signal.getsignal(signal.SIGUSR2)
    with SchedulerSignals().installed():
        assert signal.getsignal(signal.SIGUSR2) is before
    monkeypatch.setenv("SUBMITIT_EXECUTOR", "slurm")
    with SchedulerSignals().installed():
        assert signal.getsignal(signal.SIGUSR2) is not before
    assert signal.getsignal(signal.SIGUSR2) is before
