"""`python -m <module> ...` in child processes forked from one interpreter that has already imported the heavy
modules, so a test that runs a command-line entry point many times pays Python's start-up (about 2.5 s of imports
for `python -m agent`) once, not every time.

Each run is still its own process: its own pid (signals work), argv, environment, working directory, stdout and
stderr (files, read back afterwards) and exit code, and it runs the module's `__main__` through `runpy` as
`python -m` does, then exits as the interpreter does (threads joined, atexit handlers run, streams flushed).
What differs from a cold start: the preloaded modules were imported once, under the environment the test
session had when the first run started (a variable that a module reads at import time keeps that value).
The warm interpreter is multiprocessing's forkserver, one per process: make one WarmPython per test process
(tests/conftest.py's `warm_python` fixture), since a second one's preload list would not be used.
"""

from __future__ import annotations

import atexit
import importlib.util
import multiprocessing
import os
import runpy
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class WarmChild:
    """One run, with the parts of `subprocess.Popen` the tests use."""

    def __init__(self, process: multiprocessing.process.BaseProcess, args: list[str], folder: Path):
        self._process, self.args, self._folder = process, args, folder

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.exitcode

    def poll(self) -> int | None:
        return self._process.exitcode

    def send_signal(self, sig: int) -> None:
        os.kill(self.pid, sig)

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self._process.exitcode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        try:
            self.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.join(10)
            raise
        return self.output("stdout"), self.output("stderr")

    def output(self, stream: str) -> str:
        """What the process has written so far to "stdout" or "stderr"."""
        return (self._folder / stream).read_text(errors="replace")


class WarmPython:
    def __init__(self, preload: list[str]):
        # The forkserver skips a preload module it cannot import without a word, so a renamed module would
        # silently make every run cold again: name it here instead.
        missing = [name for name in preload if not _importable(name)]
        if missing:
            raise ValueError(f"no such module to preload: {', '.join(missing)}")
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload(preload)
        self._folder = Path(tempfile.mkdtemp(prefix="warm-python-"))
        self._runs = 0

    def popen(self, module: str, *args: str, env: dict[str, str] | None = None,
              cwd: Path = ROOT) -> WarmChild:
        self._runs += 1
        folder = self._folder / str(self._runs)
        folder.mkdir()
        environment = dict(os.environ if env is None else env)
        process = self._context.Process(target=_run_module, name=f"python -m {module}",
                                        args=(module, list(args), environment, str(cwd), str(folder)))
        process.start()
        return WarmChild(process, ["python", "-m", module, *args], folder)

    def run(self, module: str, *args: str, env: dict[str, str] | None = None, cwd: Path = ROOT,
            timeout: float = 240) -> subprocess.CompletedProcess:
        child = self.popen(module, *args, env=env, cwd=cwd)
        stdout, stderr = child.communicate(timeout)
        return subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)

    def close(self) -> None:
        """Remove the runs' output files (the forkserver ends with this process)."""
        shutil.rmtree(self._folder, ignore_errors=True)

    def start(self) -> None:
        """Start the forkserver now (it imports the preloaded modules), rather than on the first run."""
        from multiprocessing import forkserver

        forkserver.ensure_running()


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def _run_module(module: str, args: list[str], env: dict[str, str], cwd: str, folder: str) -> None:
    """In the forked child: become `python -m module args...`, then exit the way the interpreter does."""
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.stdout.flush()
    sys.stderr.flush()
    for fd, name in ((1, "stdout"), (2, "stderr")):
        out = os.open(os.path.join(folder, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(out, fd)
        os.close(out)
    sys.stdin = open(os.devnull)  # noqa: SIM115 - the interpreter's own stdin, open for the process's life
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.argv = [module, *args]
    sys.path[0:0] = [cwd]
    code = 0
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        if not isinstance(exc.code, int | None):
            print(exc.code, file=sys.stderr)
    except KeyboardInterrupt:
        traceback.print_exc()
        code = 128 + signal.SIGINT
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        threading._shutdown()  # join non-daemon threads, as interpreter exit does
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)
