"""The warm interpreter (testkit/warm_python.py) refuses a preload list naming a module that does not exist:
multiprocessing's forkserver would skip it silently, and every run would pay the cold imports again."""

from __future__ import annotations

import pytest

from testkit.warm_python import WarmPython


@pytest.mark.parametrize("name", ["rollouts.leaderboard", "no_such_package.module"])
def test_a_preload_naming_no_module_is_refused(name):
    with pytest.raises(ValueError, match=f"no such module to preload: {name}"):
        WarmPython(["batch.cli", name])
