"""The test suite's own machinery (registered by tests/conftest.py): one folder per test session, both
cores used without tests stepping on each other, and where the time went in every log.

- The session folder (`pipeline-tests-*` in the system temp folder, made by the session that starts the
  others and removed at its end): what the jobs of every test may share, read by the tests and the
  processes they start through the environment: remembered config checks (PIPELINE_CACHE_DIR), the
  GPU pool's locks (PIPELINE_GPU_LOCK_DIR), the inductor cache of jobs whose subject is not a cold
  compile (tests/conftest.py: SESSION_INDUCTOR_CACHE), the whole-host lock.
- Parallel runs (pytest-xdist, `make test`: `-n 2 --dist loadgroup`; the slow suite on 3 workers): tests
  sharing a fixture of module scope run on one worker, so that it is set up once; a test marked
  `whole_host` (it reads the host's own timing, load or contention) runs with no other test beside it:
  every other test holds the host's lock shared while it runs, a whole-host test holds it alone. The
  whole-host tests run one after another on one worker, which keeps the lock from the first to the last;
  the slow tests are scheduled first, so that the run ends on short tests.
- One template process per process that runs tests (pipeline.job.template, started at the session's
  start, ended at its end): every single run a test starts forks its worker from it
  (PIPELINE_TEMPLATE_SOCKET) instead of importing torch and the model libraries afresh, seconds of CPU a
  job; a job whose environment the template cannot serve spawns, as a single run always did.
  PIPELINE_TEST_TEMPLATE=0 leaves it out (every single run spawns). Its workers' CPU time is counted in
  the tests' CPU time (process_cpu_s).
- The time report at the end: the slowest fixture set-ups, the time by file, and the default-suite tests
  over the budget (a report, not a check: the suite's budget is a figure for the whole run).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import resource
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

SESSION_ENV = "PIPELINE_TEST_SESSION_DIR"
ONE_THREAD_ENV = "PIPELINE_TEST_ONE_THREAD"  # set where the session set OMP_NUM_THREADS=1 itself
WHOLE_HOST = "whole_host"
TEMPLATE_IMPORTED = "template: imports done"  # what a template's log says once it can fork workers
FIXTURE_TIMES = "fixture_setup_s"  # a test report's user property: {fixture (scope): seconds}
CPU_TIME = "cpu_s"  # a test report's user properties: cpu_s_setup, cpu_s_call, cpu_s_teardown
TIMES_FILE = "PIPELINE_TEST_TIMES"  # a path: every test's wall and CPU seconds written there as JSON
# A default-suite test over this is named in the report (a figure to act on, not a failure).
BUDGET_S = float(os.environ.get("PIPELINE_TEST_BUDGET_S", "30"))
TEMPLATE_SWITCH = "PIPELINE_TEST_TEMPLATE"  # 0: no session template, every single run spawns its worker
_TEMPLATE: list = []  # this process's template (pipeline.job.worker_start.TemplateProcess), while the session runs


def session_dir() -> Path | None:
    """This test session's folder (None outside a test session)."""
    value = os.environ.get(SESSION_ENV)
    return Path(value) if value else None


def whole_host(item: pytest.Item) -> bool:
    return item.get_closest_marker(WHOLE_HOST) is not None


def templates_imported(folder: Path | None, timeout_s: float = 180.0) -> None:
    """Wait until the session's templates have their imports done: a template importing torch beside a
    whole-host test is load the test did not make (a CPU's worth on a 2-core host), and this process's
    own template counts as its child's work."""
    deadline = time.monotonic() + timeout_s
    while folder is not None and time.monotonic() < deadline:
        logs = list(folder.glob("template-*/**/*.log"))
        if all(TEMPLATE_IMPORTED in log.read_text(errors="replace") for log in logs):
            return
        time.sleep(0.2)


def group_of(item: pytest.Item) -> str | None:
    """The worker a test must share with others: `whole_host` for every whole-host test (they run one
    after another, the host theirs throughout), its `xdist_group` mark's name, or its module's where it
    uses a fixture of module (or class, package) scope, so that the fixture is set up once."""
    if whole_host(item):
        return WHOLE_HOST
    for mark in item.iter_markers("xdist_group"):
        return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
    info = getattr(item, "_fixtureinfo", None)
    if info is None or not isinstance(item, pytest.Function):
        return None
    if any(defs[-1].scope in ("module", "class", "package") for defs in info.name2fixturedefs.values()):
        return item.module.__name__
    return None


def slow_first(items: list[pytest.Item], groups: dict[str, str]) -> list[pytest.Item]:
    """items with the slow tests first, a group's tests kept together (slow when any of them is), the
    order otherwise unchanged (every worker orders its collection alike)."""
    fast = {group: True for group in groups.values()}
    for item in items:
        if item.nodeid in groups and "slow" in item.keywords:
            fast[groups[item.nodeid]] = False

    def is_fast(item: pytest.Item) -> bool:
        group = groups.get(item.nodeid)
        return fast[group] if group else "slow" not in item.keywords

    return sorted(items, key=is_fast)


class SuitePlugin:
    def __init__(self, config: pytest.Config):
        self.config = config
        self.owns_session_dir = False
        self.fixture_times: list[tuple[str, str, float]] = []  # set up during the current test's setup
        self.tests: dict[str, Times] = defaultdict(Times)  # nodeid -> setup + call + teardown
        self.fixtures: dict[tuple[str, str], list[float]] = defaultdict(list)
        self.started = time.monotonic()
        self.host_lock: IO[str] | None = None  # the host's lock file while this worker holds the lock

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
        # Torch on one thread in every process the tests start (unless the user set it), but for a whole-host
        # test: two tests run at once on two cores, and two jobs of a thread per core each would
        # oversubscribe them, torch's threads then waiting for each other at every operation (a job's
        # step of milliseconds took hundreds on the loaded host). A test that needs torch's own default
        # passes OMP_NUM_THREADS=None in its job's env (tests/conftest.py: run_cli).
        if "OMP_NUM_THREADS" not in os.environ:
            os.environ["OMP_NUM_THREADS"] = os.environ[ONE_THREAD_ENV] = "1"

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """This process's template, where this process runs tests (an xdist worker, or a session without
        workers) and the session has its folder."""
        runs_tests = "PYTEST_XDIST_WORKER" in os.environ or not getattr(
            session.config.option, "numprocesses", None
        )
        folder = session_dir()
        if not runs_tests or folder is None or os.environ.get(TEMPLATE_SWITCH) == "0":
            return
        from pipeline.job.supervisor import worker_env
        from pipeline.job.template import import_env
        from pipeline.job.worker_start import (
            TEMPLATE_ENV,
            TEMPLATE_IMPORT_ENV,
            TemplateProcess,
            fork_supported,
        )

        if fork_supported():
            return
        env = worker_env(None)
        own = folder / f"template-{os.getpid()}"
        template = TemplateProcess.start(sweep_dir=own, env=env, cwd=Path(__file__).parent.parent)
        _TEMPLATE.append(template)
        os.environ[TEMPLATE_ENV] = template.info.socket
        os.environ[TEMPLATE_IMPORT_ENV] = json.dumps(import_env(env))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from pipeline.job.worker_start import TEMPLATE_ENV, TEMPLATE_IMPORT_ENV

        while _TEMPLATE:
            os.environ.pop(TEMPLATE_ENV, None)
            os.environ.pop(TEMPLATE_IMPORT_ENV, None)
            _TEMPLATE.pop().stop()

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.owns_session_dir:
            shutil.rmtree(os.environ.pop(SESSION_ENV), ignore_errors=True)

    # ------------------------------------------------------------------------------------ parallel runs
    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        """Each worker writes the tests' groups to the session folder, where the scheduler reads them (xdist
        3.8's own loadgroup marks a group in the test's id, which pytest 9.2 no longer lets it change:
        pytest-dev/pytest-xdist#1386). The slow tests come first: the workers then end the run on short
        tests instead of one worker finishing a long one alone."""
        worker = os.environ.get("PYTEST_XDIST_WORKER")
        folder = session_dir()
        if worker is None or folder is None:
            return
        groups = {item.nodeid: group for item in items if (group := group_of(item))}
        items[:] = slow_first(items, groups)
        scratch = folder / f".groups-{worker}.json"
        scratch.write_text(json.dumps(groups))
        scratch.replace(folder / f"groups-{worker}.json")

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log):
        """`--dist loadgroup`: xdist's scheduling by scope, a test's scope being its group (group_of)."""
        if config.getvalue("dist") != "loadgroup":
            return None
        from xdist.scheduler import LoadScopeScheduling

        class GroupScheduling(LoadScopeScheduling):
            groups: dict[str, str] | None = None

            def _split_scope(self, nodeid: str) -> str:
                if self.groups is None:  # every worker has collected (and written its groups) by now
                    written = sorted(session_dir().glob("groups-*.json"))  # type: ignore[union-attr]
                    self.groups = json.loads(written[0].read_text()) if written else {}
                return self.groups.get(nodeid, nodeid)

        return GroupScheduling(config, log)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None):
        alone = whole_host(item)
        with torch_default_threads(alone):
            self.take_host(alone=alone)
            if alone:
                templates_imported(session_dir())
            try:
                return (yield)
            finally:
                # whole-host tests run one after another on one worker (group_of): the host stays theirs
                # until the last, instead of the other workers' tests draining before each of them
                if not (alone and nextitem is not None and whole_host(nextitem)):
                    self.release_host()

    def take_host(self, *, alone: bool) -> None:
        """The host's lock for one test, where other workers run tests beside this one: shared for a test,
        alone for a whole-host test (kept from the whole-host test before it, if any). A whole-host test
        first takes the turnstile, which every test passes before it shares the host: tests keep starting
        only until a whole-host test waits."""
        folder = session_dir()
        if self.host_lock is not None or folder is None or "PYTEST_XDIST_WORKER" not in os.environ:
            return
        lock = open(folder / "host.lock", "a")  # noqa: SIM115 (held across tests; release_host closes it)
        with open(folder / "host.turnstile", "a") as turnstile:
            fcntl.flock(turnstile, fcntl.LOCK_EX)
            try:
                fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
            finally:
                fcntl.flock(turnstile, fcntl.LOCK_UN)
        self.host_lock = lock

    def release_host(self) -> None:
        if self.host_lock is not None:
            fcntl.flock(self.host_lock, fcntl.LOCK_UN)
            self.host_lock.close()
            self.host_lock = None

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
        with cpu_time(item, "setup"):
            try:
                return (yield)
            finally:
                if self.fixture_times:
                    times = {f"{name} ({scope})": round(s, 2) for name, scope, s in self.fixture_times}
                    item.user_properties.append((FIXTURE_TIMES, times))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        with cpu_time(item, "call"):
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item, nextitem: pytest.Item | None):
        with cpu_time(item, "teardown"):
            return (yield)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        times = self.tests[report.nodeid]
        times.wall += report.duration
        times.cpu += dict(report.user_properties).get(f"{CPU_TIME}_{report.when}", 0.0)
        times.slow = "slow" in report.keywords
        if report.when == "setup":
            for fixture, seconds in dict(report.user_properties).get(FIXTURE_TIMES, {}).items():
                self.fixtures[(fixture, report.nodeid.split("::")[0])].append(seconds)

    def pytest_terminal_summary(self, terminalreporter, exitstatus: int, config: pytest.Config) -> None:
        if "PYTEST_XDIST_WORKER" in os.environ or not self.tests:
            return
        write = terminalreporter.write_line
        terminalreporter.section("where the time went")
        wall = time.monotonic() - self.started
        tests = self.tests.values()
        summed, cpu = sum(t.wall for t in tests), sum(t.cpu for t in tests)
        workers = getattr(config.option, "numprocesses", None) or 1
        write(
            f"{len(self.tests)} tests: {summed:.0f} s of test time in {wall:.0f} s of wall time on {workers} "
            f"worker(s); {cpu:.0f} s of CPU time (the tests and the processes they waited for: what a busy "
            f"host does not inflate as much as wall time; {cpu / (os.cpu_count() or 1):.0f} s on "
            f"{os.cpu_count()} cores)"
        )
        write("slowest fixture set-ups, wall (a module or session fixture is set up once per worker):")
        slowest = sorted(self.fixtures.items(), key=lambda kv: -sum(kv[1]))[:12]
        for (fixture, path), times in slowest:
            several = f" x{len(times)}" if len(times) > 1 else ""
            write(f"  {sum(times):7.1f} s  {fixture} in {path}{several}")
        by_file: dict[str, Times] = defaultdict(Times)
        for nodeid, t in self.tests.items():
            by_file[nodeid.split("::")[0]].add(t)
        write("by file (setup + call + teardown), wall and CPU:")
        for path, t in sorted(by_file.items(), key=lambda kv: -kv[1].wall):
            if t.wall >= 1:
                write(f"  {t.wall:7.1f} s {t.cpu:7.1f} s  {path}")
        over = sorted(
            ((t.wall, n, t.cpu) for n, t in self.tests.items() if not t.slow and t.wall > BUDGET_S),
            reverse=True,
        )
        if os.environ.get(TIMES_FILE):  # every test's figures, for a table or a comparison of two runs
            rows = {
                n: {"wall_s": round(t.wall, 2), "cpu_s": round(t.cpu, 2), "slow": t.slow}
                for n, t in self.tests.items()
            }
            Path(os.environ[TIMES_FILE]).write_text(json.dumps(rows, indent=1))
        if over:
            write(
                f"default-suite tests over {BUDGET_S:.0f} s of wall time (share their set-up, make them cheaper, "
                "or mark them slow if the default suite cannot afford them; PIPELINE_TEST_BUDGET_S), wall and CPU:"
            )
            for seconds, nodeid, cpu_s in over:
                write(f"  {seconds:7.1f} s {cpu_s:7.1f} s  {nodeid}")


@contextlib.contextmanager
def torch_default_threads(alone: bool) -> Iterator[None]:
    """A whole-host test's processes run torch on its own default threads (a thread per core), as a
    user's job does: the session's one-thread setting is lifted for the test."""
    if not (alone and os.environ.get(ONE_THREAD_ENV)):
        yield
        return
    os.environ.pop("OMP_NUM_THREADS", None)
    try:
        yield
    finally:
        os.environ["OMP_NUM_THREADS"] = "1"


@dataclass
class Times:
    wall: float = 0.0
    cpu: float = 0.0
    slow: bool = False

    def add(self, other: Times) -> None:
        self.wall += other.wall
        self.cpu += other.cpu


def process_cpu_s() -> float:
    """CPU seconds of this process and of the processes it waited for (theirs included, recursively), and
    of its template with the workers it forked and reaped."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime + template_cpu_s()


def template_cpu_s() -> float:
    """The session template's CPU seconds and its reaped workers' (utime, stime, cutime, cstime of
    /proc/<pid>/stat): it is this process's child, but waited for only at the session's end."""
    if not _TEMPLATE:
        return 0.0
    try:
        fields = Path(f"/proc/{_TEMPLATE[0].proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def cpu_time(item: pytest.Item, phase: str) -> Iterator[None]:
    """The CPU seconds of one phase of a test, as a property of its report."""
    started = process_cpu_s()
    try:
        yield
    finally:
        item.user_properties.append((f"{CPU_TIME}_{phase}", round(process_cpu_s() - started, 2)))
