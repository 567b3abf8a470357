// Previews (sandboxes.ports, client.exposePort/ports/revokePort): a busybox httpd bound to
// 127.0.0.1 in a container workspace with no network, exposed and opened through the
// controller's preview listener (STATION_PREVIEW) with the token and without, public, listed,
// revoked; a host workspace refused (409); arguments refused before any request.
import assert from "node:assert/strict";
import { request } from "node:http";
import { after, before, test } from "node:test";

import { ContainerSandboxAdapter, StationClient } from "station-sandbox/container";
import { HostSandboxAdapter } from "station-sandbox/host";
import { IMAGE_LAYOUT, PREVIEW, ROOT, SECCOMP, SOCKET, until } from "./env.mjs";

const skip = !IMAGE_LAYOUT
  ? process.env.STATION_TEST_CONTAINER_SKIP || "no container test image (STATION_TEST_IMAGE_LAYOUT not set)"
  : !PREVIEW
    ? "no preview listener (STATION_PREVIEW not set)"
    : false;
const PAGE = "hello-preview\n";
let sandboxes;
let ws;

/** GET url through the preview listener, its Host header the URL's host: {status, body}. */
function previewGet(url, token) {
  const u = new URL(url);
  const [host, port] = [PREVIEW.slice(0, PREVIEW.lastIndexOf(":")), Number(PREVIEW.slice(PREVIEW.lastIndexOf(":") + 1))];
  const headers = { Host: u.host };
  if (token !== undefined) headers.Authorization = `Bearer ${token}`;
  return new Promise((resolve, reject) => {
    const req = request({ host, port, path: u.pathname, headers, agent: false }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode, body }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.setTimeout(30_000, () => req.destroy(new Error("no answer from the preview listener in 30 s")));
    req.end();
  });
}

before(async () => {
  if (skip) return;
  const img = await new StationClient({ socketPath: SOCKET }).importImage({ path: IMAGE_LAYOUT, name: "busybox" });
  sandboxes = new ContainerSandboxAdapter({ rootDir: ROOT, image: `busybox@${img.digest}`, seccompProfile: SECCOMP, network: "none" });
  ws = await sandboxes.create();
  await sandboxes.startService(ws.id, {
    name: "www",
    command: "mkdir -p www && echo hello-preview > www/index.html && exec busybox httpd -f -p 127.0.0.1:3000 -h www",
  });
  await until("httpd listening on 3000", async () => (await sandboxes.ports.list(ws.id)).listening.some((l) => l.port === 3000), 30_000);
});

after(async () => {
  if (ws) await sandboxes.delete(ws.id).catch(() => {});
});

test("ports: arguments refused before any request", async () => {
  const c = new StationClient({ socketPath: SOCKET });
  for (const bad of [0, 65536, 1.5, "3000"]) {
    await assert.rejects(c.exposePort("no-such-workspace", bad), TypeError);
    await assert.rejects(c.revokePort("no-such-workspace", bad), TypeError);
  }
  for (const ms of [0, 30 * 24 * 3600 * 1000 + 1, 1.5]) {
    await assert.rejects(c.exposePort("no-such-workspace", 3000, { expiresInMs: ms }), TypeError);
  }
  // Positive control: a valid call reaches the controller (and its 404).
  await assert.rejects(c.exposePort("no-such-workspace", 3000), { status: 404 });
});

test("ports: a host workspace is refused (409)", async () => {
  const host = new HostSandboxAdapter({ rootDir: ROOT });
  const w = await host.create();
  try {
    await assert.rejects(host.ports.expose(w.id, 3000), { status: 409, code: "conflict" });
  } finally {
    await host.delete(w.id);
  }
});

test("ports: token exposure through the preview, listed, revoked", { skip }, async () => {
  const e = await sandboxes.ports.expose(ws.id, 3000, { expiresInMs: 600_000 });
  try {
    assert.equal(e.port, 3000);
    assert.equal(e.access, "token");
    assert.ok(e.url.includes(e.host), `${e.url} has ${e.host}`);
    assert.equal(e.openUrl, `${e.url}?station_preview_token=${encodeURIComponent(e.token)}`);
    assert.equal((await previewGet(e.url)).status, 401);
    assert.equal((await previewGet(e.url, `wrong${e.token}`)).status, 401);
    assert.deepEqual(await previewGet(e.url, e.token), { status: 200, body: PAGE });
    const listed = await sandboxes.ports.list(ws.id);
    assert.deepEqual(listed.exposed.map((x) => x.port), [3000]);
    assert.equal("token" in listed.exposed[0], false);
    assert.ok(listed.listening.some((l) => l.port === 3000 && l.address === "127.0.0.1"), JSON.stringify(listed.listening));
    await assert.rejects(sandboxes.ports.expose(ws.id, 3000), { status: 409 });
  } finally {
    assert.equal(await sandboxes.ports.revoke(ws.id, 3000), undefined);
  }
  assert.equal((await previewGet(e.url, e.token)).status, 404);
  assert.deepEqual((await sandboxes.ports.list(ws.id)).exposed, []);
  await assert.rejects(sandboxes.ports.revoke(ws.id, 3000), { status: 404, code: "not_found" });
});

test("ports: public exposure needs no token", { skip }, async () => {
  const e = await sandboxes.client.exposePort(ws.id, 3000, { public: true });
  try {
    assert.equal(e.access, "public");
    assert.equal(e.token, undefined);
    assert.equal(e.openUrl, undefined);
    assert.deepEqual(await previewGet(e.url), { status: 200, body: PAGE });
  } finally {
    await sandboxes.client.revokePort(ws.id, 3000);
  }
  assert.equal((await previewGet(e.url)).status, 404);
});
