"""examples/python/agent_tool.py: the agent tool's ``execute`` against a real workspace."""

from __future__ import annotations

import importlib.util
import os
from types import ModuleType

import pytest

import station_sandbox as ss


def _load() -> ModuleType:
    examples = os.environ.get("STATION_EXAMPLES", "")
    if not examples:
        pytest.skip("STATION_EXAMPLES not set")
    spec = importlib.util.spec_from_file_location("agent_tool", os.path.join(examples, "agent_tool.py"))
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_agent_tool_execute(ws: ss.Workspace) -> None:
    tool = _load()
    assert tool.execute(ws, "echo hi; echo err >&2; exit 2") == {"output": "hi\nerr\n", "returncode": 2}
    assert tool.execute(ws, "true") == {"output": "", "returncode": 0}
    # A command that is several lines and ends in a comment still gets its stderr folded in.
    assert tool.execute(ws, "echo a\necho b >&2 # note") == {"output": "a\nb\n", "returncode": 0}
    r = tool.execute(ws, "echo slow; sleep 30", timeout=0.3)
    assert r["returncode"] == 124 and r["output"].startswith("slow\n") and "timed out" in r["output"]
    r = tool.execute(ws, "printf 'x\\377y'")
    assert r == {"output": "x\ufffdy", "returncode": 0}
    r = tool.execute(ws, "kill -9 $$")
    assert r["returncode"] == 137
    env = tool.StationEnvironment(ws, cwd="/tmp", max_output_bytes=64)
    assert env.execute("pwd") == {"output": "/tmp\n", "returncode": 0}
    r = env.execute("printf 'H%.0s' $(seq 40); head -c 920 /dev/zero | tr '\\0' m; printf 'T%.0s' $(seq 40)")
    assert r["output"] == "H" * 32 + "\n[... 936 bytes of output left out ...]\n" + "T" * 32
    assert r["returncode"] == 0
