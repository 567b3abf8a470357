// One client, three workers (all up): creates on each worker and on the most free, routes
// exec/get/delete by the id's worker prefix, lists across all; the worker list from the option,
// $STATION_WORKERS and a workers file; unknown workers, hostile and silent workers.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { HostSandboxAdapter, StationClient, StationError, WorkerUnavailableError, snapshotWorkerOf, workerOfId } from "station-sandbox/host";
import { NAMES, OPTION, W, WORKERS_FILE, withEnv } from "./workers-env.mjs";

const only = (name) => new StationClient({ url: W[name].url, token: W[name].token });

async function runEcho(client, id, text) {
  const run = await client.startCommand(id, { command: `echo ${text}` }, { waitMs: 20_000 });
  let r = run;
  for (let i = 0; r.status === "running" && i < 60; i++) r = await client.command(id, run.id, { waitMs: 1000 });
  assert.equal(r.status, "exited");
  return r.stdout;
}

test("workers: a snapshot taken on w2 is listed, created from and deleted with no worker named", async () => {
  const c = new StationClient({ workers: OPTION });
  const ws = await c.createWorkspace({ adapter: "host" }, { worker: "w2" });
  const made = [ws.id];
  try {
    const wrote = await c.startCommand(ws.id, { command: "echo from-w2 >~/kept.txt" }, { waitMs: 20_000 });
    assert.equal(wrote.exitCode, 0);
    const s = await c.createSnapshot(ws.id, { name: "ts-w2" });
    assert.equal(snapshotWorkerOf(s.id), "w2");
    assert.equal(s.worker, "w2");
    const listed = await c.snapshots();
    assert.deepEqual(listed.unreachable, []);
    assert.deepEqual(listed.filter((x) => x.id === s.id).map((x) => x.worker), ["w2"]);
    const direct = [];
    for (const n of NAMES) direct.push(...(await only(n).snapshots()).map((x) => x.id));
    assert.deepEqual(listed.map((x) => x.id).sort(), direct.sort());
    assert.equal((await c.snapshot(s.id)).workspaceId, ws.id);
    await assert.rejects(only("w1").snapshot(s.id), (e) => e instanceof StationError && e.status === 404 && /kept by worker w2/.test(e.message));
    await assert.rejects(c.createWorkspace({ snapshot: s.id }, { worker: "w1" }), /kept by worker w2/);
    const from = await c.createWorkspace({ snapshot: s.id });
    made.push(from.id);
    assert.equal(workerOfId(from.id), "w2");
    const cat = await c.startCommand(from.id, { command: "cat ~/kept.txt" }, { waitMs: 20_000 });
    assert.equal(cat.stdout, "from-w2\n");
    await assert.rejects(c.deleteSnapshot(s.id), (e) => e instanceof StationError && e.status === 409);
    await c.deleteWorkspace(made.pop());
    assert.equal(await c.deleteSnapshot(s.id), undefined);
    await assert.rejects(c.snapshot(s.id), (e) => e instanceof StationError && e.status === 404);
    assert.ok(!(await c.snapshots()).some((x) => x.id === s.id));
    assert.throws(() => c.snapshot("s-nope"), /invalid snapshot id "s-nope"/);
    assert.throws(() => c.snapshot("s-abcdefghijklmnopqrstuvwxyz"), /names no worker/);
  } finally {
    for (const id of made) await c.deleteWorkspace(id);
  }
});

test("workers: workers() reports w1, w2, w3 up with version, capacity and workspaces", async () => {
  const c = new StationClient({ workers: OPTION });
  assert.deepEqual(c.workerNames, NAMES);
  const states = await c.workers();
  assert.deepEqual(states.map((s) => [s.name, s.url, s.up]), NAMES.map((n) => [n, W[n].url, true]));
  const max = { w1: 4, w2: 8, w3: 6 };
  for (const s of states) {
    assert.equal(typeof s.version, "string");
    assert.equal(s.capacity.workspaces.max, max[s.name]);
    assert.equal(s.capacity.workspaces.free, max[s.name] - s.workspaces);
    assert.ok(s.capacity.memoryBytes.available > 0 && s.capacity.memoryBytes.available <= s.capacity.memoryBytes.total);
    assert.ok(Number.isInteger(s.capacity.cpus) && s.capacity.cpus >= 1);
  }
});

test("workers: creates on each worker by name; exec, get, list and delete route by the id", async () => {
  const sandboxes = new HostSandboxAdapter({ workers: OPTION });
  const made = [];
  try {
    for (const name of NAMES) {
      const ws = await sandboxes.create({}, { worker: name });
      made.push(ws);
      assert.equal(ws.worker, name);
      assert.equal(workerOfId(ws.id), name);
      assert.ok(ws.id.startsWith(`${name}-`), ws.id);
    }
    for (const ws of made) {
      // the workspace is on its worker, and only there
      for (const other of NAMES) {
        if (other === ws.worker) assert.equal((await only(other).workspace(ws.id)).id, ws.id);
        else await assert.rejects(only(other).workspace(ws.id), { status: 404, code: "not_found" });
      }
      assert.equal((await sandboxes.workspace(ws.id)).worker, ws.worker);
      assert.equal(await runEcho(sandboxes.client, ws.id, `on-${ws.worker}`), `on-${ws.worker}\n`);
      const run = await sandboxes.exec(ws.id, { command: "echo exec" });
      assert.equal((await sandboxes.wait(ws.id, run.id)).stdout, "exec\n");
    }
    const list = await sandboxes.workspaces();
    assert.deepEqual(list.unreachable, []);
    for (const ws of made) assert.equal(list.find((x) => x.id === ws.id)?.worker, ws.worker);
    // the list is every worker's list, each worker's workspaces in its own order
    const direct = [];
    for (const n of NAMES) direct.push(...(await only(n).workspaces()).map((x) => x.id));
    assert.deepEqual(list.map((x) => x.id), direct);
  } finally {
    for (const ws of made) assert.deepEqual(await sandboxes.delete(ws.id), { id: ws.id, state: "deleted" });
  }
  for (const ws of made) await assert.rejects(sandboxes.workspace(ws.id), { status: 404, code: "not_found" });
});

test("workers: creates on the worker with the most free workspace slots", async () => {
  const c = new StationClient({ workers: OPTION });
  const made = [];
  try {
    // w1 max 4, w2 max 8, w3 max 6 (nothing else on them): w2 first
    const first = await c.createWorkspace({ adapter: "host" });
    made.push(first);
    assert.equal(first.worker, "w2");
    // fill w2 to 4 free slots: now w3 (6 free) has the most
    for (let i = 0; i < 3; i++) made.push(await c.createWorkspace({ adapter: "host" }, { worker: "w2" }));
    const states = await c.workers();
    assert.deepEqual(states.map((s) => s.capacity.workspaces.free), [4, 4, 6]);
    const next = await c.createWorkspace({ adapter: "host" });
    made.push(next);
    assert.equal(next.worker, "w3");
  } finally {
    for (const ws of made) await c.deleteWorkspace(ws.id);
  }
});

test("workers: $STATION_WORKERS (unix: URLs) configures the same routing", async () => {
  const value = NAMES.map((n) => `${n}=unix:${W[n].sock}`).join(",");
  await withEnv({ STATION_WORKERS: value, STATION_URL: undefined, STATION_SOCKET: undefined }, async () => {
    const c = new StationClient();
    assert.deepEqual(c.workerNames, NAMES);
    const ws = await c.createWorkspace({ adapter: "host" }, { worker: "w3" });
    try {
      assert.equal(ws.worker, "w3");
      assert.equal(await runEcho(c, ws.id, "env"), "env\n");
      assert.ok((await c.workspaces()).some((x) => x.id === ws.id));
    } finally {
      await c.deleteWorkspace(ws.id);
    }
  });
  // a bad list is refused, naming what is wrong
  for (const [bad, want] of [
    ["w1", /STATION_WORKERS: "w1" is not NAME=URL/],
    ["W1=http://127.0.0.1:1", /worker name "W1" is not 1-32 of \[a-z0-9-\]/],
    ["w1=ftp://x", /only http:, https: and unix: are supported/],
    ["w1=http://127.0.0.1:1,w1=http://127.0.0.1:2", /worker w1 is named twice/],
  ]) {
    await withEnv({ STATION_WORKERS: bad }, async () => assert.throws(() => new StationClient(), { name: "TypeError", message: want }));
  }
});

test("workers: a workers file with per-worker token files (mode-checked)", { skip: WORKERS_FILE ? false : "no workers file" }, async () => {
  await withEnv({ STATION_WORKERS: undefined, STATION_WORKERS_FILE: WORKERS_FILE, STATION_TOKEN: undefined, STATION_URL: undefined }, async () => {
    const c = new StationClient();
    assert.deepEqual(c.workerNames, NAMES);
    const ws = await c.createWorkspace({ adapter: "host" }, { worker: "w1" });
    try {
      assert.equal(await runEcho(c, ws.id, "file"), "file\n");
      const list = await c.workspaces();
      assert.deepEqual(list.unreachable, []);
      assert.ok(list.some((x) => x.id === ws.id));
    } finally {
      await c.deleteWorkspace(ws.id);
    }
  });
  // a token file others can read is refused, naming it and its mode
  const dir = mkdtempSync(join(tmpdir(), "workers-"));
  const tok = join(dir, "w1.token");
  writeFileSync(tok, W.w1.token + "\n");
  chmodSync(tok, 0o644);
  const file = join(dir, "workers");
  writeFileSync(file, `# a comment\nw1 ${W.w1.url} w1.token # beside the workers file\n`);
  await withEnv({ STATION_WORKERS: undefined, STATION_WORKERS_FILE: file }, async () => {
    assert.throws(() => new StationClient(), { message: new RegExp(`line 2: token file ${tok}: mode 0644 lets group or others at it`) });
    chmodSync(tok, 0o600); // positive control
    const c = new StationClient();
    assert.equal((await c.on("w1").worker()).name, "w1");
  });
});

test("workers: an id on a worker that is not configured is an error naming the worker", async () => {
  const c = new StationClient({ workers: OPTION });
  const id = "w9-aaaaaaaaaaaaaaaaaaaaaaaaaa";
  await assert.rejects(c.workspace(id), (e) => {
    assert.ok(e instanceof StationError);
    assert.equal(e.code, "not_found");
    assert.match(e.message, /^workspace w9-a{26} is on worker w9, which is not in this client's workers$/);
    return true;
  });
  await assert.rejects(c.startCommand(id, { command: "true" }), { message: /is on worker w9/ });
  await assert.rejects(c.createWorkspace({}, { worker: "w9" }), { code: "not_found", message: "worker w9 is not in this client's workers" });
  await withEnv({ STATION_WORKERS: `w1=${W.w1.url}` }, async () => {
    await assert.rejects(new StationClient().deleteWorkspace(id), { message: "workspace w9-aaaaaaaaaaaaaaaaaaaaaaaaaa is on worker w9, which is not in STATION_WORKERS" });
  });
});

test("workers: calls that name no workspace go to one worker through on(NAME)", async () => {
  const c = new StationClient({ workers: OPTION });
  await assert.rejects(c.images(), { name: "TypeError", message: /GET \/v1\/images: this client has several workers \(w1, w2, w3\)/ });
  assert.ok(Array.isArray(await c.on("w1").images()));
  assert.equal((await c.on("w3").worker()).name, "w3");
});

/** A worker that answers as told: garbage, an error, a wrong name, or nothing at all. */
async function fakeWorker(handler) {
  const server = createServer(handler);
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => { server.closeAllConnections(); return new Promise((r) => server.close(r)); } };
}

test("workers: a hostile or silent worker is marked in lists and skipped for creates; the others keep working", async () => {
  const fakes = {
    garbage: await fakeWorker((req, res) => res.end("{not json")),
    error: await fakeWorker((req, res) => { res.statusCode = 500; res.end('{"error":{"code":"internal","message":"boom"}}'); }),
    liar: await fakeWorker((req, res) => res.end(JSON.stringify(req.url === "/v1/worker" ? { name: "w1", version: "x", workspaces: 0, limits: { maxWorkspaces: 100000 } } : { workspaces: "nope" }))),
    silent: await fakeWorker(() => {}),
    // a list without end: refused past 64 MiB, never held whole
    endless: await fakeWorker((req, res) => {
      if (req.url === "/v1/worker") return res.end(JSON.stringify({ name: "endless", version: "x", workspaces: 0, limits: { maxWorkspaces: 0 } }));
      res.write('{"workspaces":[');
      const chunk = Buffer.alloc(1 << 20, "1,");
      const more = () => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once("drain", more);
      };
      more();
    }),
  };
  try {
    const workers = [...OPTION, ...Object.entries(fakes).map(([name, f]) => ({ name, url: f.url, token: "t" }))];
    const c = new StationClient({ workers, timeoutMs: 1000 });
    const endless = new StationClient({ workers: [{ name: "endless", url: fakes.endless.url }] });
    await assert.rejects(endless.workspaces(), { code: "protocol_error", message: /GET \/v1\/workspaces: an answer over 67108864 bytes/ });
    const states = await c.workers();
    const down = Object.fromEntries(states.filter((s) => !s.up).map((s) => [s.name, s.error]));
    assert.deepEqual(Object.keys(down).sort(), ["error", "garbage", "liar", "silent"]);
    assert.match(down.liar, /answers as worker "w1", not liar/);
    assert.match(down.silent, /no answer within 1 s/);
    assert.match(down.error, /HTTP 500: boom/);
    assert.equal(states.find((s) => s.name === "endless").up, true); // up, but with no free slot
    const list = await c.workspaces();
    assert.deepEqual(list.unreachable.map((u) => u.worker).sort(), ["endless", "error", "garbage", "liar", "silent"]);
    assert.match(list.unreachable.find((u) => u.worker === "silent").error, /no answer within 1 s/);
    // the liar claims 100000 free slots but is not itself: never chosen
    const ws = await c.createWorkspace({ adapter: "host" });
    try {
      assert.equal(ws.worker, "w2");
    } finally {
      await c.deleteWorkspace(ws.id);
    }
  } finally {
    for (const f of Object.values(fakes)) await f.close();
  }
});
