// Idempotency keys through the SDK against a real controller (host adapter): keys given and
// made, conflicts, bad keys, and the SDK's own retry after a connection error, provoked by a
// proxy socket that lets the create reach the controller and drops its answer.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { HostSandboxAdapter, StationClient } from "station-sandbox/host";
import { ROOT, SOCKET } from "./env.mjs";

const sandboxes = new HostSandboxAdapter({ rootDir: ROOT });
const client = new StationClient({ socketPath: SOCKET });
let ws;
const made = [];

before(async () => {
  ws = await sandboxes.create();
});

after(async () => {
  for (const id of [ws?.id, ...made]) if (id) await sandboxes.delete(id).catch(() => {});
});

async function runsWith(command) {
  return (await client.commands(ws.id, { limit: 1000 })).filter((r) => r.command === command).length;
}

/**
 * A unix socket in front of the controller. The first `drop` connections are forwarded to the
 * controller, but the client's connection is cut as soon as the controller answers: the
 * answers are kept in `dropped`. Later connections pass through.
 */
function dropProxy(drop) {
  const dir = mkdtempSync(join(tmpdir(), "idem-"));
  const path = join(dir, "sock");
  const dropped = [];
  const server = net.createServer((c) => {
    const up = net.connect(SOCKET);
    c.on("error", () => up.destroy());
    up.on("error", () => c.destroy());
    c.pipe(up);
    if (drop > 0) {
      drop--;
      let answer = "";
      up.on("data", (d) => {
        answer += d.toString("utf8");
        if (!answer.includes("\r\n\r\n")) return;
        dropped.push(answer);
        c.destroy();
        up.destroy();
      });
    } else up.pipe(c);
  });
  return new Promise((resolve) =>
    server.listen(path, () =>
      resolve({
        path,
        dropped,
        close: () => new Promise((r) => server.close(() => (rmSync(dir, { recursive: true, force: true }), r()))),
      }),
    ),
  );
}

test("idempotency: exec twice with one key starts one run", async () => {
  const command = "echo sdk-idem-1";
  const a = await sandboxes.exec(ws.id, { command, idempotencyKey: "sdk-key-1" });
  const b = await sandboxes.exec(ws.id, { command, idempotencyKey: "sdk-key-1" });
  assert.equal(b.id, a.id);
  assert.equal(await runsWith(command), 1);
  // Positive control: without a key of the caller's, each exec is a run of its own.
  const c = await sandboxes.exec(ws.id, { command });
  const d = await sandboxes.exec(ws.id, { command });
  assert.notEqual(c.id, d.id);
  assert.equal(await runsWith(command), 3);
});

test("idempotency: the same key with another command is a 409 conflict naming it", async () => {
  await sandboxes.exec(ws.id, { command: "echo sdk-idem-2", idempotencyKey: "sdk-key-2" });
  await assert.rejects(sandboxes.exec(ws.id, { command: "echo sdk-idem-3", idempotencyKey: "sdk-key-2" }), (e) => {
    assert.equal(e.name, "StationError");
    assert.equal(e.status, 409);
    assert.equal(e.code, "conflict");
    assert.equal(e.field, "Idempotency-Key");
    assert.match(e.message, /"sdk-key-2"/);
    return true;
  });
  assert.equal(await runsWith("echo sdk-idem-3"), 0);
});

test("idempotency: a bad key is a TypeError before any request", async () => {
  for (const key of ["", "x".repeat(256), "tab\there", "caf\u00e9"]) {
    await assert.rejects(sandboxes.exec(ws.id, { command: "echo sdk-idem-4", idempotencyKey: key }), TypeError);
  }
  assert.equal(await runsWith("echo sdk-idem-4"), 0);
  await sandboxes.exec(ws.id, { command: "echo sdk-idem-4", idempotencyKey: "x".repeat(255) });
  assert.equal(await runsWith("echo sdk-idem-4"), 1);
});

test("idempotency: createWorkspace, startService and createTerminal with one key twice", async () => {
  const w1 = await client.createWorkspace({ adapter: "host" }, { idempotencyKey: "sdk-ws-1" });
  made.push(w1.id);
  const w2 = await client.createWorkspace({ adapter: "host" }, { idempotencyKey: "sdk-ws-1" });
  assert.equal(w2.id, w1.id);
  const svc = { name: "sdk-idem", command: "exec sleep 30.6201" };
  const s1 = await client.startService(ws.id, svc, { idempotencyKey: "sdk-svc-1" });
  const s2 = await client.startService(ws.id, svc, { idempotencyKey: "sdk-svc-1" });
  assert.equal(s2.id, s1.id);
  assert.equal((await client.services(ws.id)).filter((s) => s.name === "sdk-idem").length, 1);
  await client.deleteService(ws.id, "sdk-idem");
  const term = { command: "exec sleep 30.6202", cols: 80, rows: 24 };
  const t1 = await client.createTerminal(ws.id, term, { idempotencyKey: "sdk-term-1" });
  const t2 = await client.createTerminal(ws.id, term, { idempotencyKey: "sdk-term-1" });
  assert.equal(t2.id, t1.id);
  assert.equal((await client.terminals(ws.id)).filter((t) => t.id === t1.id).length, 1);
  await client.closeTerminal(ws.id, t1.id).catch(() => {});
});

test("idempotency: exec retried after a lost answer starts one run (the SDK's own key)", async () => {
  const proxy = await dropProxy(1);
  try {
    const through = new HostSandboxAdapter({ socketPath: proxy.path });
    const command = "echo sdk-idem-retry";
    const run = await through.exec(ws.id, { command });
    assert.equal(proxy.dropped.length, 1, "the first answer was dropped");
    const first = /"id":"(r-[a-z2-7]+)"/.exec(proxy.dropped[0]);
    assert.ok(first, `the dropped answer names the run: ${proxy.dropped[0].slice(0, 300)}`);
    assert.equal(run.id, first[1], "the retry answered the run the first attempt started");
    assert.equal(await runsWith(command), 1);
  } finally {
    await proxy.close();
  }
});

test("idempotency: workspace create retried after a lost answer makes one workspace", async () => {
  const before = (await client.workspaces()).length;
  const proxy = await dropProxy(1);
  try {
    const through = new HostSandboxAdapter({ socketPath: proxy.path });
    const w = await through.create();
    made.push(w.id);
    assert.equal(proxy.dropped.length, 1);
    assert.match(proxy.dropped[0], new RegExp(`"id":"${w.id}"`));
    assert.equal((await client.workspaces()).length, before + 1);
  } finally {
    await proxy.close();
  }
});

test("idempotency: without retries the lost answer is a connection error (and the run exists)", async () => {
  const proxy = await dropProxy(1);
  try {
    const through = new HostSandboxAdapter({ socketPath: proxy.path });
    const command = "echo sdk-idem-noretry";
    await assert.rejects(through.exec(ws.id, { command, retries: 0 }), { name: "StationError", status: 0, code: "connection_failed" });
    assert.equal(await runsWith(command), 1, "the controller started it: why retries need the key");
  } finally {
    await proxy.close();
  }
});
