"""The test suite's own machinery (registered by tests/conftest.py): one folder per test session, both
cores used without tests stepping on each other, and where the time went in every log.

- The session folder (`pipeline-tests-*` in the system temp folder, made by the session that starts the
  others and removed at its end): what the jobs of every test may share, read by the tests and the
  processes they start through the environment: remembered config checks (PIPELINE_CACHE_DIR), the
  GPU pool's locks (PIPELINE_GPU_LOCK_DIR), the inductor cache of jobs whose subject is not a cold
  compile (tests/conftest.py: SESSION_INDUCTOR_CACHE), the whole-host lock.
- Parallel runs (pytest-xdist, `make test`: `-n 2 --dist loadgroup`): tests sharing a fixture of module
  scope run on one worker, so that it is set up once; a test marked `whole_host` (it reads the host's own
  timing, load or contention) runs with no other test beside it: every other test holds the host's lock
  shared while it runs, a whole-host test holds it alone.
- The time report at the end: the slowest fixture set-ups, the time by file, and the default-suite tests
  over the budget (a report, not a check: the suite's budget is a figure for the whole run).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

SESSION_ENV = "PIPELINE_TEST_SESSION_DIR"
WHOLE_HOST = "whole_host"
FIXTURE_TIMES = "fixture_setup_s"  # a test report's user property: {fixture (scope): seconds}
# A default-suite test over this is named in the report (a figure to act on, not a failure).
BUDGET_S = float(os.environ.get("PIPELINE_TEST_BUDGET_S", "30"))


def session_dir() -> Path | None:
    """This test session's folder (None outside a test session)."""
    value = os.environ.get(SESSION_ENV)
    return Path(value) if value else None


class SuitePlugin:
    def __init__(self, config: pytest.Config):
        self.config = config
        self.owns_session_dir = False
        self.fixture_times: list[tuple[str, str, float]] = []  # set up during the current test's setup
        self.phases: dict[str, float] = defaultdict(float)  # nodeid -> setup + call + teardown seconds
        self.default_suite: set[str] = set()  # nodeids of tests not marked slow
        self.fixtures: dict[tuple[str, str], list[float]] = defaultdict(list)
        self.started = time.monotonic()

    # ------------------------------------------------------------------------------------ session folder
    def pytest_configure(self, config: pytest.Config) -> None:
        if not config.pluginmanager.hasplugin("xdist"):  # the marks still mean something in one process
            config.addinivalue_line("markers", "xdist_group(name): run on one pytest-xdist worker")
        if os.environ.get(SESSION_ENV):  # an xdist worker, or a session inside a test: the folder is there
            return
        folder = Path(tempfile.mkdtemp(prefix="pipeline-tests-"))
        self.owns_session_dir = True
        os.environ[SESSION_ENV] = str(folder)
        # The user's own settings win; otherwise this session's, never the user's cache or the machine's locks.
        os.environ.setdefault("PIPELINE_CACHE_DIR", str(folder / "known-good"))
        os.environ.setdefault("PIPELINE_GPU_LOCK_DIR", str(folder / "gpu-locks"))
        # torch.compile inside pytest's own processes (tests that compile in-process) caches here too.
        os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(folder / "inductor-in-process"))

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.owns_session_dir:
            shutil.rmtree(os.environ.pop(SESSION_ENV), ignore_errors=True)

    # ------------------------------------------------------------------------------------ parallel runs
    @pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the tests' ids
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        for item in items:
            if any(True for _ in item.iter_markers("xdist_group")):
                continue
            module = item.module.__name__ if isinstance(item, pytest.Function) else ""
            defs = getattr(item, "_fixtureinfo", None)
            shared = [
                name
                for name, fixturedefs in (defs.name2fixturedefs.items() if defs else ())
                if fixturedefs[-1].scope in ("module", "class", "package")
            ]
            if shared and module:
                item.add_marker(pytest.mark.xdist_group(module))

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None):
        with self.host(alone=item.get_closest_marker(WHOLE_HOST) is not None):
            return (yield)

    @contextlib.contextmanager
    def host(self, *, alone: bool) -> Iterator[None]:
        """The host's lock around one test, where other workers run tests beside this one: shared for a
        test, alone for a whole-host test. A whole-host test first takes the turnstile, which every test
        passes before it shares the host: tests keep starting only until a whole-host test waits."""
        folder = session_dir()
        if folder is None or "PYTEST_XDIST_WORKER" not in os.environ:
            yield
            return
        with open(folder / "host.turnstile", "a") as turnstile, open(folder / "host.lock", "a") as lock:
            fcntl.flock(turnstile, fcntl.LOCK_EX)
            try:
                fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
            finally:
                fcntl.flock(turnstile, fcntl.LOCK_UN)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    # ------------------------------------------------------------------------------------ time report
    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef, request: pytest.FixtureRequest):
        started = time.perf_counter()
        try:
            return (yield)
        finally:
            took = time.perf_counter() - started
            if took >= 0.05:
                self.fixture_times.append((fixturedef.argname, fixturedef.scope, took))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item):
        self.fixture_times = []
        try:
            return (yield)
        finally:
            if self.fixture_times:
                times = {f"{name} ({scope})": round(s, 2) for name, scope, s in self.fixture_times}
                item.user_properties.append((FIXTURE_TIMES, times))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.phases[report.nodeid] += report.duration
        if "slow" not in report.keywords:
            self.default_suite.add(report.nodeid)
        if report.when == "setup":
            for name, value in report.user_properties:
                if name == FIXTURE_TIMES:
                    for fixture, seconds in value.items():
                        self.fixtures[(fixture, report.nodeid.split("::")[0])].append(seconds)

    def pytest_terminal_summary(self, terminalreporter, exitstatus: int, config: pytest.Config) -> None:
        if "PYTEST_XDIST_WORKER" in os.environ or not self.phases:
            return
        write = terminalreporter.write_line
        terminalreporter.section("where the time went")
        wall = time.monotonic() - self.started
        summed = sum(self.phases.values())
        workers = getattr(config.option, "numprocesses", None) or 1
        write(
            f"{len(self.phases)} tests: {summed:.0f} s of test time in {wall:.0f} s of wall time ({workers} worker(s))"
        )
        write("slowest fixture set-ups (a module or session fixture is set up once per worker):")
        slowest = sorted(self.fixtures.items(), key=lambda kv: -sum(kv[1]))[:12]
        for (fixture, path), times in slowest:
            write(
                f"  {sum(times):7.1f} s  {fixture} in {path}" + (f" x{len(times)}" if len(times) > 1 else "")
            )
        by_file: dict[str, float] = defaultdict(float)
        for nodeid, seconds in self.phases.items():
            by_file[nodeid.split("::")[0]] += seconds
        write("test time by file (setup + call + teardown):")
        for path, seconds in sorted(by_file.items(), key=lambda kv: -kv[1]):
            if seconds >= 1:
                write(f"  {seconds:7.1f} s  {path}")
        over = sorted(
            ((s, n) for n, s in self.phases.items() if n in self.default_suite and s > BUDGET_S), reverse=True
        )
        if over:
            write(
                f"default-suite tests over {BUDGET_S:.0f} s (share their set-up, make them cheaper, or mark "
                "them slow if the default suite cannot afford them; PIPELINE_TEST_BUDGET_S):"
            )
            for seconds, nodeid in over:
                write(f"  {seconds:7.1f} s  {nodeid}")
