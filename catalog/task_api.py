"""The one client of a berth server's Task API: its splits, the tasks of a split, and one public task by id.

A server lists tasks as public views (no reference plans): `GET /berth_planning/splits`,
`POST /berth_planning/tasks {"split"}` and `GET /api/tasks/<task_id>` (PORTSIM_SPEC §6.8). Every failure, from a
refused connection to an answer that is not a task list, is a `TaskAPIError` that names the server and what was
asked; a task id goes into a URL only after `valid_task_id` says it is safe. Under a server policy
(agent/netguard.py, for a server a visitor chose) every connection is checked, no redirect is followed, and an error
says only "this server is not allowed" or "could not reach the server". Every answer is read within a budget
(agent/http_bounds.py: at most ANSWER_MAX_BYTES in ANSWER_MAX_S, agent/limits.py), and a task the server shows is
refused when it is too large to draw or grade (`task_size_problem`). Both are `TaskTooLarge`, said as such even of a
visitor's server (the words are ours, not the server's): a task that exists but is too large is not a missing one.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self

import httpx

from agent.http_bounds import AnswerTooLarge
from agent.limits import ANSWER_MAX_BYTES, ANSWER_MAX_S, task_size_problem, valid_task_id
from agent.netguard import (
    NOT_ALLOWED,
    UNREACHABLE,
    ServerPolicy,
    ServerRefused,
    http_client,
    http_url,
    origin,
)

TIMEOUT_S = 10.0


class TaskAPIError(RuntimeError):
    """A server's Task API could not be read, or did not answer with tasks."""


class TaskTooLarge(TaskAPIError):
    """A server's answer over the size bound, or a task too large to draw or grade: it says which."""


class TaskAPI:
    """One server's Task API over one HTTP connection pool; use it as a context manager."""

    def __init__(self, url: str, *, timeout_s: float = TIMEOUT_S, policy: ServerPolicy | None = None,
                 max_bytes: int = ANSWER_MAX_BYTES, max_s: float = ANSWER_MAX_S):
        """`timeout_s` bounds each connect and read, `max_bytes` and `max_s` each whole answer."""
        self.base = http_url(url)
        self._quiet = policy is not None and not policy.trusts(*origin(self.base))
        self._http = http_client(policy, timeout_s=timeout_s, max_bytes=max_bytes, max_s=max_s)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def splits(self) -> list[str]:
        """The names of the server's splits."""
        answer = self._json("the split list", "GET", "/berth_planning/splits")
        try:
            return [str(s["name"]) if isinstance(s, dict) else str(s) for s in answer]
        except (KeyError, TypeError) as exc:
            raise self._error("the split list", exc) from exc

    def tasks(self, split: str) -> list[dict]:
        """The public views of every task of `split`."""
        what = f"the tasks of split {split!r}"
        answer = self._json(what, "POST", "/berth_planning/tasks", json={"split": split})
        tasks = answer.get("tasks", []) if isinstance(answer, dict) else None
        if not isinstance(tasks, list) or not all(isinstance(t, dict) and "task_id" in t for t in tasks):
            raise TaskAPIError(f"{self.base} answered {what} with something other than a task list")
        return tasks

    def task(self, task_id: str) -> dict | None:
        """The public view of one task; None when the server does not have it."""
        if not valid_task_id(task_id):
            raise ValueError(f"task id {str(task_id)[:80]!r} must be 1-128 letters, digits, '.', '-' or '_'")
        what = f"task {task_id!r}"
        answer = self._json(what, "GET", f"/api/tasks/{task_id}", missing_ok=True)
        if answer is not None and not isinstance(answer, dict):
            raise self._error(what, ValueError("something other than a task"))
        problem = task_size_problem(answer) if answer is not None else None
        if problem:  # a task the app could not draw or grade in reasonable time
            raise TaskTooLarge(f"{what} {problem.removeprefix('it ')}")
        return answer

    def _json(self, what: str, method: str, path: str, *, missing_ok: bool = False, **options: Any) -> Any:
        try:
            response = self._http.request(method, self.base + path, **options)
            if missing_ok and response.status_code == 404:
                return None
            response.raise_for_status()
            return response.json()
        except ServerRefused as exc:
            raise TaskAPIError(str(exc) if str(exc) == NOT_ALLOWED else UNREACHABLE) from None
        except AnswerTooLarge as exc:  # our own words, safe to say of any server
            raise TaskTooLarge(f"{what}: the server's answer is too large "
                               f"({str(exc).removeprefix('the answer is ')})") from None
        except (httpx.HTTPError, ValueError) as exc:  # ValueError: a body that is not JSON
            raise self._error(what, exc) from exc

    def _error(self, what: str, exc: Exception) -> TaskAPIError:
        if self._quiet:  # the status or body of a visitor's server would map the network behind it
            return TaskAPIError(UNREACHABLE)
        return TaskAPIError(f"could not read {what} from {self.base}: {type(exc).__name__}: {exc}")
