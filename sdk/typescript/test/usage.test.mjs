// Usage history against a real controller sampling every 200 ms (test-sdk-typescript.sh's
// --usage-interval-ms): a host workspace running a CPU loop has samples with cpu > 0 in
// workspaceUsage(), the same points GET …/usage gives for the same since and step; the worker's
// totals in workerUsage(); each form of since; a malformed since is a 400 naming it.
import assert from "node:assert/strict";
import { request } from "node:http";
import { after, before, test } from "node:test";

import { StationClient, StationError } from "station-sandbox";
import { SOCKET, until } from "./env.mjs";

const client = new StationClient({ socketPath: SOCKET });
let ws;
let run;

/** GET path over the unix socket, apart from the SDK: the API's own answer. */
function apiGet(path) {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: SOCKET, path, method: "GET" }, (res) => {
      let body = "";
      res.on("data", (d) => (body += d));
      res.on("end", () => (res.statusCode === 200 ? resolve(JSON.parse(body)) : reject(new Error(`${path}: ${res.statusCode} ${body}`))));
    });
    req.on("error", reject);
    req.end();
  });
}

/** The points that began before cut (ISO): those no later sample changes. */
const settled = (doc, cut) => doc.samples.filter((s) => s.t < cut);
const hot = (doc) => doc.samples.filter((s) => s.cpu > 0);

before(async () => {
  ws = await client.createWorkspace({ adapter: "host" });
  run = await client.startCommand(ws.id, { command: "while :; do :; done" });
  await until("15 samples with cpu > 0 (3 s of the loop)", async () => hot(await client.workspaceUsage(ws.id, { since: "60s", step: 200 })).length >= 15, 30_000);
});

after(async () => {
  if (run) await client.cancelCommand(ws.id, run.id).catch(() => {});
  if (ws) await client.deleteWorkspace(ws.id).catch(() => {});
});

test("usage: workspaceUsage() has the CPU loop, as the API answers it", async () => {
  const now = Date.now();
  const since = now - 20_000;
  const h = await client.workspaceUsage(ws.id, { since, step: 200 });
  assert.equal(h.workspaceId, ws.id);
  assert.equal(h.stepMs, 200);
  assert.equal(h.intervalMs, 200);
  const cut = new Date(now - 1000).toISOString();
  assert.ok(settled(h, cut).filter((s) => s.cpu > 0).length >= 2, JSON.stringify(h.samples.slice(-5)));
  const s = hot(h).at(-1);
  for (const k of ["memoryBytes", "memoryMaxBytes", "pids", "rxBytes", "txBytes", "spanMs"]) assert.equal(typeof s[k], "number", k);
  const api = await apiGet(`/v1/workspaces/${ws.id}/usage?since=${since}&step=200ms`);
  assert.deepEqual(settled(h, cut), settled(api, cut));
  assert.deepEqual(h.limits, api.limits);
});

test("usage: since as a string, a Date and milliseconds; step alone", async () => {
  const floor = new Date(Date.now() - 32_000).toISOString();
  for (const since of ["30s", new Date(Date.now() - 30_000), Date.now() - 30_000]) {
    const h = await client.workspaceUsage(ws.id, { since, step: "1s" });
    assert.equal(h.stepMs, 1000);
    assert.ok(h.samples.length > 0 && h.samples[0].t >= floor, `${since}: ${h.samples[0]?.t}`);
  }
  assert.equal((await client.workspaceUsage(ws.id, { step: "1m" })).stepMs, 60_000);
});

test("usage: workerUsage() is the worker's totals, as GET /v1/worker/usage", async () => {
  const now = Date.now();
  const h = await client.workerUsage({ since: now - 20_000, step: 500 });
  assert.equal(h.worker, (await client.worker()).name);
  assert.equal(h.tenant, null);
  const cut = new Date(now - 1000).toISOString();
  assert.ok(settled(h, cut).filter((s) => s.cpu > 0).length >= 2);
  const api = await apiGet(`/v1/worker/usage?since=${now - 20_000}&step=500ms`);
  assert.deepEqual(settled(h, cut), settled(api, cut));
});

test("usage: a malformed since or step is a 400 naming it; a number since must be epoch ms", async () => {
  await assert.rejects(client.workspaceUsage(ws.id, { since: "2x" }), (e) => e instanceof StationError && e.status === 400 && /since/.test(e.message));
  await assert.rejects(client.workerUsage({ step: "50ms" }), (e) => e instanceof StationError && e.status === 400 && /step/.test(e.message));
  assert.throws(() => client.workspaceUsage(ws.id, { since: 3600 }), TypeError);
  // the control
  assert.equal((await client.workspaceUsage(ws.id, { since: "1m", step: "500ms" })).stepMs, 500);
});
