"""The SDK covers the API: every operation docs/api.md describes (and docs/openapi.yaml lists:
the two must agree) has a method in Client and in AsyncClient, named below. An operation added
to the docs without a method here fails this test; the deliberate exceptions are listed with
why. No controller needed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import station_sandbox as ss

DOCS = Path(__file__).resolve().parents[3] / "docs"
METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH")

# (method, path with every {param} as {}) -> the methods that do it, sync and async.
COVERED: dict[tuple[str, str], list[str]] = {
    ("GET", "/v1/openapi.json"): ["Client.openapi", "AsyncClient.openapi"],
    ("GET", "/v1/ready"): ["Client.ready", "AsyncClient.ready"],
    ("GET", "/v1/worker"): ["Client.worker", "AsyncClient.worker"],
    ("GET", "/v1/worker/usage"): ["Client.worker_usage", "AsyncClient.worker_usage"],
    ("POST", "/v1/workspaces"): ["Workspaces.create", "AsyncWorkspaces.create"],
    ("GET", "/v1/workspaces"): ["Workspaces.list", "AsyncWorkspaces.list"],
    ("GET", "/v1/workspaces/{}"): ["Workspaces.get", "AsyncWorkspaces.get",
                                   "Workspace.refresh", "AsyncWorkspace.refresh"],
    ("DELETE", "/v1/workspaces/{}"): ["Workspace.delete", "AsyncWorkspace.delete"],
    ("PATCH", "/v1/workspaces/{}"): ["Workspaces.update", "Workspace.update",
                                     "AsyncWorkspaces.update", "AsyncWorkspace.update"],
    ("POST", "/v1/workspaces/{}/restart"): ["Workspace.restart", "AsyncWorkspace.restart"],
    ("GET", "/v1/workspaces/{}/network"): ["Workspace.get_network", "AsyncWorkspace.get_network"],
    ("PUT", "/v1/workspaces/{}/network"): ["Workspace.set_egress", "AsyncWorkspace.set_egress"],
    ("GET", "/v1/workspaces/{}/usage"): ["Workspace.usage", "AsyncWorkspace.usage"],
    ("POST", "/v1/workspaces/{}/commands"): ["Workspace.start", "Workspace.run",
                                             "AsyncWorkspace.start", "AsyncWorkspace.run"],
    ("GET", "/v1/workspaces/{}/commands"): ["Workspace.runs", "AsyncWorkspace.runs"],
    ("GET", "/v1/workspaces/{}/commands/{}"): ["RunHandle.wait", "RunHandle.refresh",
                                               "AsyncRunHandle.wait", "AsyncRunHandle.refresh",
                                               "Workspace.run_handle", "AsyncWorkspace.run_handle"],
    ("POST", "/v1/workspaces/{}/commands/{}/cancel"): ["RunHandle.cancel", "AsyncRunHandle.cancel"],
    ("GET", "/v1/workspaces/{}/commands/{}/output"): ["RunHandle.follow", "AsyncRunHandle.follow"],
    ("POST", "/v1/images"): ["Images.import_path", "Images.pull", "AsyncImages.import_path",
                             "AsyncImages.pull"],
    ("GET", "/v1/images"): ["Images.list", "AsyncImages.list"],
    ("GET", "/v1/images/{}"): ["Images.get", "AsyncImages.get"],
    ("DELETE", "/v1/images/{}"): ["Images.delete", "AsyncImages.delete"],
    ("GET", "/v1/images/{}/export"): ["Images.export", "AsyncImages.export"],
    ("POST", "/v1/workspaces/{}/services"): ["Services.start", "AsyncServices.start"],
    ("GET", "/v1/workspaces/{}/services"): ["Services.list", "AsyncServices.list"],
    ("GET", "/v1/workspaces/{}/services/{}"): ["Services.get", "AsyncServices.get"],
    ("POST", "/v1/workspaces/{}/services/{}/stop"): ["Services.stop", "AsyncServices.stop"],
    ("POST", "/v1/workspaces/{}/services/{}/restart"): ["Services.restart", "AsyncServices.restart"],
    ("DELETE", "/v1/workspaces/{}/services/{}"): ["Services.delete", "AsyncServices.delete"],
    ("GET", "/v1/workspaces/{}/services/{}/logs"): ["Services.logs", "AsyncServices.logs"],
    ("POST", "/v1/workspaces/{}/terminals"): ["Terminals.create", "AsyncTerminals.create"],
    ("GET", "/v1/workspaces/{}/terminals"): ["Terminals.list", "AsyncTerminals.list"],
    ("GET", "/v1/workspaces/{}/terminals/{}"): ["Terminals.get", "AsyncTerminals.get"],
    ("POST", "/v1/workspaces/{}/terminals/{}/resize"): ["Terminals.resize", "AsyncTerminals.resize",
                                                        "Terminal.resize", "AsyncTerminal.resize"],
    ("DELETE", "/v1/workspaces/{}/terminals/{}"): ["Terminals.kill", "AsyncTerminals.kill"],
    ("GET", "/v1/workspaces/{}/terminals/{}/attach"): ["Terminals.attach", "AsyncTerminals.attach"],
    ("GET", "/v1/workspaces/{}/files/stat"): ["Files.stat", "AsyncFiles.stat"],
    ("GET", "/v1/workspaces/{}/files/list"): ["Files.list", "AsyncFiles.list"],
    ("GET", "/v1/workspaces/{}/files"): ["Files.read", "Files.download", "AsyncFiles.read"],
    ("PUT", "/v1/workspaces/{}/files"): ["Files.write", "AsyncFiles.write"],
    ("POST", "/v1/workspaces/{}/files/mkdir"): ["Files.mkdir", "AsyncFiles.mkdir"],
    ("POST", "/v1/workspaces/{}/files/rename"): ["Files.rename", "AsyncFiles.rename"],
    ("DELETE", "/v1/workspaces/{}/files"): ["Files.remove", "AsyncFiles.remove"],
    ("GET", "/v1/workspaces/{}/files/watch"): ["Files.watch"],
    ("PUT", "/v1/workspaces/{}/secrets/{}"): ["Secrets.set", "AsyncSecrets.set"],
    ("GET", "/v1/workspaces/{}/secrets"): ["Secrets.list", "AsyncSecrets.list"],
    ("GET", "/v1/workspaces/{}/secrets/{}"): ["Secrets.get", "AsyncSecrets.get"],
    ("DELETE", "/v1/workspaces/{}/secrets/{}"): ["Secrets.delete", "AsyncSecrets.delete"],
    ("POST", "/v1/workspaces/{}/ports"): ["Ports.expose", "AsyncPorts.expose"],
    ("GET", "/v1/workspaces/{}/ports"): ["Ports.list", "AsyncPorts.list"],
    ("DELETE", "/v1/workspaces/{}/ports/{}"): ["Ports.revoke", "AsyncPorts.revoke"],
    ("GET", "/v1/events"): ["Client.events", "AsyncClient.events"],
    ("POST", "/v1/tokens"): ["Tokens.create", "AsyncTokens.create"],
    ("GET", "/v1/tokens"): ["Tokens.list", "AsyncTokens.list"],
    ("GET", "/v1/tokens/{}"): ["Tokens.get", "AsyncTokens.get"],
    ("DELETE", "/v1/tokens/{}"): ["Tokens.delete", "AsyncTokens.delete"],
    ("GET", "/v1/audit"): ["Client.audit", "AsyncClient.audit"],
    ("POST", "/v1/workspaces/{}/pause"): ["Workspace.pause", "AsyncWorkspace.pause"],
    ("POST", "/v1/workspaces/{}/resume"): ["Workspace.resume", "AsyncWorkspace.resume"],
    ("POST", "/v1/workspaces/{}/snapshots"): ["Workspace.snapshot", "AsyncWorkspace.snapshot"],
    ("GET", "/v1/snapshots"): ["Snapshots.list", "AsyncSnapshots.list"],
    ("GET", "/v1/snapshots/{}"): ["Snapshots.get", "AsyncSnapshots.get"],
    ("DELETE", "/v1/snapshots/{}"): ["Snapshots.delete", "AsyncSnapshots.delete"],
    ("POST", "/v1/workspaces/{}/fork"): ["Workspace.fork", "AsyncWorkspace.fork"],
    ("POST", "/v1/workspaces/{}/contexts"): ["Contexts.create", "AsyncContexts.create"],
    ("GET", "/v1/workspaces/{}/contexts"): ["Contexts.list", "AsyncContexts.list"],
    ("GET", "/v1/workspaces/{}/contexts/{}"): ["Contexts.get", "AsyncContexts.get",
                                               "CodeContext.refresh", "AsyncCodeContext.refresh"],
    ("DELETE", "/v1/workspaces/{}/contexts/{}"): ["CodeContext.delete", "AsyncCodeContext.delete"],
    ("POST", "/v1/workspaces/{}/contexts/{}/restart"): ["CodeContext.restart",
                                                        "AsyncCodeContext.restart"],
    ("POST", "/v1/workspaces/{}/contexts/{}/interrupt"): ["CodeContext.interrupt",
                                                          "AsyncCodeContext.interrupt"],
    ("POST", "/v1/workspaces/{}/contexts/{}/execute"): ["CodeContext.execute",
                                                        "AsyncCodeContext.execute"],
    ("GET", "/v1/workspaces/{}/contexts/{}/executions"): ["CodeContext.executions",
                                                          "AsyncCodeContext.executions"],
    ("GET", "/v1/workspaces/{}/contexts/{}/executions/{}"): ["CodeContext.execution",
                                                             "AsyncCodeContext.execution"],
    # execute(on_stdout=...) follows it
    ("GET", "/v1/workspaces/{}/contexts/{}/executions/{}/output"): ["CodeContext.execute",
                                                                    "AsyncCodeContext.execute"],
}

# Deliberately without a method, and why.
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("GET", "/v1/workers"): "the SDK holds its workers itself: Client(workers=...).workers()",
    ("GET", "/metrics"): "a Prometheus scrape (text exposition), for a monitoring system",
    **{(m, "/v1/workers/{}/v1/{}"): "forwarding through a controller: the SDK routes each "
       "workspace's calls to its worker itself (Client(workers=...))"
       for m in ("GET", "POST", "PUT", "DELETE", "PATCH")},
}


def _norm(path: str) -> str:
    return re.sub(r"\{[^}]*\}", "{}", path.replace("…", "{}"))


def openapi_operations() -> set[tuple[str, str]]:
    yaml = pytest.importorskip("yaml")
    doc: Any = yaml.safe_load((DOCS / "openapi.yaml").read_text())
    return {(m.upper(), _norm(p)) for p, item in doc["paths"].items() for m in item
            if m.upper() in METHODS}


def _docs_ops() -> set[tuple[str, str]]:
    """Every ``METHOD /path`` in docs/api.md's endpoint headings: ``…/x`` continues the
    heading's first path from its segment ``x``; ``GET|POST /p`` is one per method."""
    ops: set[tuple[str, str]] = set()
    for line in (DOCS / "api.md").read_text().splitlines():
        if not line.startswith("### `"):
            continue
        base = ""
        for methods, path in re.findall(r"`([A-Z|]+) ((?:/v1|…)/[^`\s\[?]*|/metrics)", line):
            if path.startswith("…"):
                rest = path[1:]  # "/services/{name}"
                head = rest.split("/")[1]
                cut = base.find("/" + head + "/") if ("/" + head + "/") in base + "/" else -1
                if base.endswith("/" + head):
                    cut = len(base) - len(head) - 1
                assert cut >= 0, f"cannot resolve {path} after {base} in: {line}"
                path = base[:cut] + rest
            else:
                base = path
            for m in methods.split("|"):
                ops.add((m, _norm(path)))
    return ops


def _method(dotted: str) -> Any:
    cls, name = dotted.split(".")
    where = [ss, ss.client, ss.aio]
    for mod in where:
        if hasattr(mod, cls):
            return getattr(getattr(mod, cls), name, None)
    return None


def test_docs_agree() -> None:
    md = _docs_ops()
    assert ("GET", "/v1/workspaces/{}/services/{}") in md  # the "…/" continuation resolved
    assert ("POST", "/v1/workspaces/{}/commands") in md    # positive controls
    oa = openapi_operations()
    assert md - oa == set(), f"in docs/api.md, not in docs/openapi.yaml: {sorted(md - oa)}"
    assert oa - md == set(), f"in docs/openapi.yaml, not in docs/api.md: {sorted(oa - md)}"


def test_every_operation_has_a_method() -> None:
    ops = _docs_ops() | openapi_operations()
    missing = sorted(op for op in ops if op not in COVERED and op not in EXCEPTIONS)
    assert not missing, f"operations without a method in the Python SDK: {missing}"
    absent = [name for op, names in COVERED.items() for name in names
              if not callable(_method(name))]
    assert not absent, f"methods named in COVERED that the SDK does not have: {absent}"
    for op, names in COVERED.items():
        # Both clients do it.
        assert any(n.startswith("Async") for n in names) or op == (
            "GET", "/v1/workspaces/{}/files/watch"), f"{op}: no AsyncClient method"
        assert any(not n.startswith("Async") for n in names), f"{op}: no Client method"
    stale = sorted(op for op in list(COVERED) + list(EXCEPTIONS) if op not in ops)
    assert not stale, f"listed here, not in the docs: {stale}"


def test_the_contract_test_catches_a_new_operation() -> None:
    # Positive control of the check itself: an operation the docs gained is reported.
    ops = _docs_ops() | {("GET", "/v1/new-thing")}
    missing = sorted(op for op in ops if op not in COVERED and op not in EXCEPTIONS)
    assert missing == [("GET", "/v1/new-thing")]


def test_new_methods_against_the_controller() -> None:
    from conftest import SOCKET, TOKEN, URL
    c = ss.Client(socket_path=SOCKET)
    assert c.openapi()["openapi"].startswith("3.")
    seen = []
    with c.workspaces.create(adapter="host", idle_timeout_ms=600_000, idempotency_key="py-k1") as ws:
        assert ws.raw.get("idleTimeoutMs") == 600_000
        # The same key answers the same workspace; another request with it is a conflict.
        assert c.workspaces.create(adapter="host", idle_timeout_ms=600_000,
                                   idempotency_key="py-k1").id == ws.id
        with pytest.raises(ss.Conflict):
            c.workspaces.create(adapter="host", idempotency_key="py-k1")
        h = ws.start("echo once", idempotency_key="py-r1")
        assert ws.start("echo once", idempotency_key="py-r1").id == h.id
        for ev in c.events(workspace=ws.id, since=0):
            seen.append((ev["type"], ev["change"]))
            if ev["type"] == "run" and ev["change"] == "ended":
                break
    assert ("workspace", "created") in seen and ("run", "ended") in seen
    with pytest.raises(ss.InvalidArgument):
        c.workspaces.create(adapter="host", idempotency_key="a\nb")
    if not URL:
        return
    admin = ss.Client(url=URL, token=TOKEN)
    t = admin.tokens.create("py-read", "read")
    assert t["token"].startswith("sst_") and admin.tokens.get(t["id"])["scope"] == "read"
    assert t["id"] in [x["id"] for x in admin.tokens.list()]
    assert admin.tokens.delete(t["id"])["revokedAt"]
    with pytest.raises(ss.Unauthorized):
        ss.Client(url=URL, token=t["token"]).workspaces.list()
    page = admin.audit(limit=5)
    assert len(page["entries"]) == 5 and "nextBefore" in page
