// Pause and resume, snapshots and fork (client.pauseWorkspace/resumeWorkspace/createSnapshot/
// snapshots/snapshot/deleteSnapshot/forkWorkspace, sandboxes.pause/resume/snapshot/fork/
// fromSnapshot, createWorkspace's snapshot, autoResume, idleAction) on container workspaces of
// the busybox image: a command on a paused workspace rejects with a PausedError (409) and runs
// after resume; autoResume lets it through; a workspace from a snapshot has the files as they
// were; forks are independent; arguments refused before any request (a request to a socket
// where nothing listens would reject with connection_failed: the control).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { ContainerSandboxAdapter, PausedError, StationClient, StationError, snapshotWorkerOf, workerOfId } from "station-sandbox/container";
import { IMAGE_LAYOUT, ROOT, SECCOMP, SOCKET } from "./env.mjs";

const skip = !IMAGE_LAYOUT
  ? process.env.STATION_TEST_CONTAINER_SKIP || "no container test image (STATION_TEST_IMAGE_LAYOUT not set)"
  : false;
let sandboxes;
let client;
let ws;
const made = [];

/** Runs command in workspace id and waits for its end: the run, terminal. */
async function sh(id, command) {
  const h = await sandboxes.exec(id, { command, timeoutMs: 10_000 });
  const r = await sandboxes.wait(id, h.id, { timeoutMs: 30_000 });
  assert.notEqual(r.status, "running", `${command}: still running after 30 s`);
  return r;
}

async function cat(id, path) {
  const r = await sh(id, `cat ${path}`);
  assert.equal(r.exitCode, 0, r.stderr);
  return r.stdout;
}

before(async () => {
  if (skip) return;
  client = new StationClient({ socketPath: SOCKET });
  const img = await client.importImage({ path: IMAGE_LAYOUT, name: "busybox" });
  sandboxes = new ContainerSandboxAdapter({ rootDir: ROOT, image: `busybox@${img.digest}`, seccompProfile: SECCOMP, network: "none" });
  ws = await sandboxes.create();
  made.push(ws.id);
  const r = await sh(ws.id, "echo base > state.txt && echo etc-base > /etc/ts-snap");
  assert.equal(r.exitCode, 0, r.stderr);
});

after(async () => {
  for (const id of made) await client?.deleteWorkspace(id).catch(() => {});
});

test("snapshots: arguments refused before any request", async () => {
  const dead = new StationClient({ socketPath: "/nonexistent/station.sock" });
  for (const bad of [0, 101, 1.5, "2", true]) {
    await assert.rejects(async () => dead.forkWorkspace("w-1", bad), TypeError, `count ${JSON.stringify(bad)}`);
  }
  for (const name of ["", "x".repeat(129), "a\nb", 3]) {
    await assert.rejects(async () => dead.createSnapshot("w-1", { name }), TypeError, `name ${JSON.stringify(name)}`);
  }
  await assert.rejects(async () => dead.createSnapshot("w-1", { memory: "yes" }), TypeError);
  await assert.rejects(async () => dead.createWorkspace({ idleAction: "sleep" }), TypeError);
  await assert.rejects(async () => dead.createWorkspace({ autoResume: "yes" }), TypeError);
  await assert.rejects(async () => dead.createWorkspace({ snapshot: "s-1", image: "busybox@sha256:" + "0".repeat(64) }), TypeError);
  await assert.rejects(async () => dead.snapshot(""), TypeError);
  // The controls: well formed, they are sent (and nothing listens).
  for (const call of [
    () => dead.forkWorkspace("w-1", 100),
    () => dead.createSnapshot("w-1", { name: "n", memory: false }),
    () => dead.pauseWorkspace("w-1"),
    () => dead.createWorkspace({ snapshot: "s-1", autoResume: true, idleAction: "pause" }, { retries: 0 }),
    () => dead.snapshots(),
  ]) {
    await assert.rejects(call, (e) => e instanceof StationError && e.code === "connection_failed");
  }
});

test("snapshots: pause and resume", { skip }, async () => {
  const p = await sandboxes.pause(ws.id);
  assert.equal(p.state, "paused");
  assert.match(p.pausedAt, /^20\d\d-/);
  assert.equal((await client.pauseWorkspace(ws.id)).state, "paused"); // nothing to do
  const e = await sandboxes.exec(ws.id, { command: "true" }).then(() => null, (err) => err);
  assert.ok(e instanceof PausedError, `a PausedError: ${e}`);
  assert.ok(e instanceof StationError);
  assert.equal(e.status, 409);
  assert.equal(e.code, "paused");
  assert.equal(await sandboxes.files.readText(ws.id, "state.txt"), "base\n"); // reads go on
  const r = await sandboxes.resume(ws.id);
  assert.equal(r.state, "ready");
  assert.equal(await cat(ws.id, "state.txt"), "base\n"); // the control: exec after resume
});

test("snapshots: autoResume and idleAction", { skip }, async () => {
  const { image } = await client.workspace(ws.id);
  const w = await client.createWorkspace({ adapter: "container", image, seccompProfile: SECCOMP, autoResume: true, idleAction: "pause", idleTimeoutMs: 600_000 });
  made.push(w.id);
  assert.equal(w.autoResume, true);
  assert.equal(w.idleAction, "pause");
  assert.equal((await client.pauseWorkspace(w.id)).state, "paused");
  const r = await sh(w.id, "echo woke");
  assert.equal(r.stdout, "woke\n", "a command resumes it first");
  assert.equal((await client.workspace(w.id)).state, "ready");
});

test("snapshots: create, list, get, a workspace from one, delete", { skip }, async () => {
  const s = await sandboxes.snapshot(ws.id, { name: "base" });
  assert.equal(snapshotWorkerOf(s.id), workerOfId(ws.id), "the id names the worker");
  assert.equal(s.worker, workerOfId(ws.id));
  assert.equal(s.workspaceId, ws.id);
  assert.equal(s.name, "base");
  assert.equal(s.memory, false);
  assert.equal(typeof s.sizeBytes, "number");
  assert.equal(typeof s.pausedMs, "number");
  assert.equal(typeof s.durable, "boolean");
  assert.equal((await client.snapshot(s.id)).id, s.id);
  assert.ok((await client.snapshots()).some((x) => x.id === s.id));
  assert.equal((await sh(ws.id, "echo later > state.txt")).exitCode, 0);
  const w = await sandboxes.fromSnapshot(s.id);
  made.push(w.id);
  assert.equal(await cat(w.id, "state.txt"), "base\n");
  assert.equal(await cat(w.id, "/etc/ts-snap"), "etc-base\n");
  await assert.rejects(client.deleteSnapshot(s.id), (e) => e instanceof StationError && e.status === 409);
  await client.deleteWorkspace(w.id);
  assert.equal(await client.deleteSnapshot(s.id), undefined);
  await assert.rejects(client.snapshot(s.id), (e) => e instanceof StationError && e.status === 404);
});

test("snapshots: fork", { skip }, async () => {
  const want = await cat(ws.id, "state.txt");
  const doc = await client.forkWorkspace(ws.id, 2);
  made.push(...doc.workspaces.map((w) => w.id));
  assert.equal(doc.workspaces.length, 2);
  assert.match(doc.snapshot, /^s-/);
  assert.equal(typeof doc.pausedMs, "number");
  const [a, b] = doc.workspaces;
  assert.equal(await cat(a.id, "state.txt"), want);
  assert.equal(await cat(b.id, "/etc/ts-snap"), "etc-base\n");
  assert.equal((await sh(a.id, "echo mine > state.txt")).exitCode, 0);
  assert.equal(await cat(b.id, "state.txt"), want, "a write in one fork is not in the other");
  assert.equal(await cat(ws.id, "state.txt"), want, "nor in the source");
  const one = await sandboxes.fork(ws.id);
  made.push(one[0].id);
  assert.equal(one.length, 1);
});

test("snapshots: ready() ignores the checkpoint check", async () => {
  // checkpoint never decides ready (docs/api.md): a worker that cannot take memory snapshots
  // still makes workspaces.
  const cp = { name: "checkpoint", ok: false, message: "criu: 'criu check' fails" };
  const fake = (checks) => ({ endpoint: "unix:/x", ready: async () => ({ ready: true, adapters: ["host"], checks }) });
  const { HostSandboxAdapter } = await import("station-sandbox/host");
  const report = await new HostSandboxAdapter({ client: fake([cp]) }).ready();
  assert.deepEqual(report.checks, [cp]);
  // The control: a check that matters still fails it.
  await assert.rejects(new HostSandboxAdapter({ client: fake([cp, { name: "cgroup", ok: false, message: "no cgroup" }]) }).ready(), (e) => {
    assert.match(e.message, /cgroup: no cgroup/);
    assert.doesNotMatch(e.message, /checkpoint/);
    return true;
  });
});
