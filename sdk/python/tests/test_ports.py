"""Previews (ws.ports): a busybox httpd bound to 127.0.0.1 in a container workspace with no
network, exposed and opened through the controller's preview listener (STATION_PREVIEW,
HOST:PORT), with the token and without, public, listed, revoked; a host workspace refused
(409); arguments refused before any request."""

from __future__ import annotations

import asyncio
import http.client
import urllib.parse
from typing import Iterator, Optional

import pytest

import station_sandbox as ss
from station_sandbox import AsyncClient, Client

from conftest import PREVIEW, SECCOMP, SOCKET, until

PAGE = b"hello-preview\n"


def preview_get(url: str, token: Optional[str] = None) -> tuple[int, bytes]:
    """GET url through the preview listener, its Host header the URL's host: (status, body)."""
    u = urllib.parse.urlsplit(url)
    host, port = PREVIEW.rsplit(":", 1)
    c = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        h = {"Host": u.netloc}
        if token is not None:
            h["Authorization"] = f"Bearer {token}"
        c.request("GET", u.path or "/", headers=h)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


@pytest.fixture(scope="module")
def pws(client: Client, image: str) -> Iterator[ss.Workspace]:
    """A container workspace (network none) whose httpd listens on 127.0.0.1:3000 only."""
    if not PREVIEW:
        pytest.skip("no preview listener (STATION_PREVIEW not set)")
    w = client.workspaces.create(adapter="container", image=image, seccomp_profile=SECCOMP,
                                 network="none")
    try:
        w.services.start("www", "mkdir -p www && echo hello-preview > www/index.html && "
                                "exec busybox httpd -f -p 127.0.0.1:3000 -h www")
        until("httpd listening on 3000",
              lambda: 3000 in [p["port"] for p in w.ports.list()["listening"]])
        yield w
    finally:
        try:
            w.delete()
        except ss.StationError:
            pass


def test_arguments_refused_before_a_request(ws: ss.Workspace) -> None:
    for bad in (0, 65536, True, "3000", 3000.0):
        with pytest.raises(ss.InvalidArgument) as e:
            ws.ports.expose(bad)  # type: ignore[arg-type]
        assert e.value.field == "port"
        with pytest.raises(ss.InvalidArgument):
            ws.ports.revoke(bad)  # type: ignore[arg-type]
    for bad_ms in (0, 30 * 24 * 3600 * 1000 + 1, 1.5, True):
        with pytest.raises(ss.InvalidArgument) as e:
            ws.ports.expose(3000, expires_in_ms=bad_ms)  # type: ignore[arg-type]
        assert e.value.field == "expiresInMs"
    with pytest.raises(ss.InvalidArgument):
        ws.ports.expose(3000, public="yes")  # type: ignore[arg-type]


def test_host_workspace_refused(ws: ss.Workspace) -> None:
    # A host workspace shares the worker's network: 409 (the container case below is the
    # positive control).
    with pytest.raises(ss.Conflict):
        ws.ports.expose(3000)


def test_token_exposure(pws: ss.Workspace) -> None:
    e = pws.ports.expose(3000, expires_in_ms=600_000)
    try:
        assert (e["port"], e["access"]) == (3000, "token")
        assert e["url"].startswith("http") and e["host"] in e["url"]
        token = e["token"]
        assert e["openUrl"] == e["url"] + "?station_preview_token=" + urllib.parse.quote(token, safe="")
        assert preview_get(e["url"])[0] == 401
        assert preview_get(e["url"], "wrong" + token)[0] == 401
        assert preview_get(e["url"], token) == (200, PAGE)
        listed = pws.ports.list()
        assert [x["port"] for x in listed["exposed"]] == [3000]
        assert "token" not in listed["exposed"][0]
        assert any(x["port"] == 3000 and x["address"] == "127.0.0.1" for x in listed["listening"])
        with pytest.raises(ss.Conflict):
            pws.ports.expose(3000)  # exposed already
    finally:
        assert pws.ports.revoke(3000) is None
    assert preview_get(e["url"], token)[0] == 404
    assert pws.ports.list()["exposed"] == []
    with pytest.raises(ss.NotFound):
        pws.ports.revoke(3000)


def test_public_exposure(pws: ss.Workspace) -> None:
    e = pws.ports.expose(3000, public=True)
    try:
        assert e["access"] == "public"
        assert "token" not in e and "openUrl" not in e
        assert preview_get(e["url"]) == (200, PAGE)
    finally:
        pws.ports.revoke(3000)
    assert preview_get(e["url"])[0] == 404


def test_async_ports(pws: ss.Workspace) -> None:
    async def main() -> None:
        async with AsyncClient(socket_path=SOCKET) as client:
            w = await client.workspaces.get(pws.id)
            e = await w.ports.expose(3000)
            try:
                assert e["openUrl"].startswith(e["url"] + "?station_preview_token=")
                assert [x["port"] for x in (await w.ports.list())["exposed"]] == [3000]
            finally:
                assert await w.ports.revoke(3000) is None
            with pytest.raises(ss.NotFound):
                await w.ports.revoke(3000)
    asyncio.run(main())
    assert pws.ports.list()["exposed"] == []
