"""Small helpers every Gradio section uses to wire its top-level handlers to its components.

Handlers are plain module-level functions whose first parameter is the section (its components and the app's
context) and whose other parameters are the event's inputs. `bind(handler, section)` fixes that first parameter
and keeps the rest of the signature and its type hints visible: Gradio reads them to inject `gr.Request`,
`gr.EventData` or an OAuth token, and `functools.partial` would hide them.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import anyio
import gradio as gr


def bind(handler: Callable[..., Any], *fixed: Any) -> Callable[..., Any]:
    """`handler` with its first `len(fixed)` parameters fixed; same kind (function, generator, async...)."""
    signature = inspect.signature(handler)
    rest = list(signature.parameters.values())[len(fixed):]
    if inspect.isasyncgenfunction(handler):
        async def bound(*args: Any, **kwargs: Any) -> Any:
            async for item in handler(*fixed, *args, **kwargs):
                yield item
    elif inspect.iscoroutinefunction(handler):
        async def bound(*args: Any, **kwargs: Any) -> Any:
            return await handler(*fixed, *args, **kwargs)
    elif inspect.isgeneratorfunction(handler):
        def bound(*args: Any, **kwargs: Any) -> Any:
            yield from handler(*fixed, *args, **kwargs)
    else:
        def bound(*args: Any, **kwargs: Any) -> Any:
            return handler(*fixed, *args, **kwargs)
    # __wrapped__ lets typing.get_type_hints resolve the handler's string annotations in its own module.
    functools.update_wrapper(bound, handler)
    bound.__signature__ = signature.replace(parameters=rest)  # type: ignore[attr-defined]
    # Only the hints of the parameters left: a fixed one may be typed with a name only a type checker imports.
    kept = {p.name for p in rest} | {"return"}
    bound.__annotations__ = {k: v for k, v in handler.__annotations__.items() if k in kept}
    return bound


def base_url(request: gr.Request | None) -> str | None:
    """The URL the visitor reached this app at (for links built off a Space), or None."""
    try:
        return str(request.request.base_url) if request is not None and request.request is not None else None
    except AttributeError:
        return None


def skip(count: int) -> tuple:
    """`count` outputs left as they are."""
    return tuple(gr.skip() for _ in range(count))


def unchanged(component: Any) -> dict:
    """A handler's answer that changes nothing (Gradio reads an empty dict as a missing answer)."""
    return {component: gr.skip()}


async def in_worker(work: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`work(*args, **kwargs)` in Gradio's own worker threads (anyio's pool, where it runs sync handlers), so the
    event loop that serves every visitor never waits on a chart, a chat render or a file read. Not
    `asyncio.to_thread`: the loop's default pool has cores + 4 threads, few enough for one busy page to hold up
    another's first frame."""
    return await anyio.to_thread.run_sync(functools.partial(work, *args, **kwargs))
