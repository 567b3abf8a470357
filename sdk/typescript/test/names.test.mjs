// Names and labels against a real controller: createWorkspace({name, labels}) shows them,
// workspaces({labels, name, state}) filters (a record, or "k=v" / "k" strings), updateWorkspace
// renames and merges labels (null removes), every call takes the name; with a worker list a
// name is looked up on every worker, and a name on two workers is an error naming both (the
// second worker: a stub that lists one workspace of that name).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import { after, before, test } from "node:test";

import { StationClient, StationError } from "station-sandbox";
import { SOCKET } from "./env.mjs";

const client = new StationClient({ socketPath: SOCKET });
const uniq = (p) => `${p}-${randomUUID().slice(0, 8)}`;
const ids = (list) => list.map((w) => w.id).sort();
let named;

// The stub worker: GET /v1/workspaces?name=N lists a workspace when holds has N.
const holds = new Map();
const stub = createServer((req, res) => {
  const u = new URL(req.url, "http://x");
  const name = u.searchParams.get("name") ?? "";
  if (u.pathname !== "/v1/workspaces") {
    res.writeHead(404).end();
    return;
  }
  const ws = holds.has(name) ? [{ id: holds.get(name), worker: "w2", state: "ready", name, labels: {} }] : [];
  res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ workspaces: ws }));
});
let stubUrl;

before(async () => {
  named = await client.createWorkspace({ adapter: "host", name: uniq("web"), labels: { team: "a", tier: "front" } });
  await new Promise((r) => stub.listen(0, "127.0.0.1", r));
  stubUrl = `http://127.0.0.1:${stub.address().port}`;
});

after(async () => {
  stub.close();
  if (named) await client.deleteWorkspace(named.id).catch(() => {});
});

test("createWorkspace takes a name and labels; a workspace without has null and {}", async () => {
  assert.match(named.name, /^web-/);
  assert.deepEqual(named.labels, { team: "a", tier: "front" });
  const plain = await client.createWorkspace({ adapter: "host" });
  try {
    assert.equal(plain.name, null);
    assert.deepEqual(plain.labels, {});
  } finally {
    await client.deleteWorkspace(plain.id);
  }
});

test("a name is usable wherever an id is", async () => {
  const got = await client.workspace(named.name);
  assert.equal(got.id, named.id);
  const run = await client.startCommand(named.name, { command: "echo hi" }, { waitMs: 10_000 });
  assert.equal(run.stdout, "hi\n");
});

test("workspaces() filters by labels, name and state", async () => {
  const team = uniq("t");
  const other = await client.createWorkspace({ adapter: "host", labels: { team, tier: "back" } });
  try {
    await client.updateWorkspace(named.id, { labels: { team } });
    assert.deepEqual(ids(await client.workspaces({ labels: { team } })), [named.id, other.id].sort());
    assert.deepEqual(ids(await client.workspaces({ labels: { team, tier: "front" } })), [named.id]);
    assert.deepEqual(ids(await client.workspaces({ labels: [`team=${team}`, "tier=back"] })), [other.id]);
    assert.deepEqual(ids(await client.workspaces({ labels: { team, tier: null } })), [named.id, other.id].sort());
    assert.deepEqual(ids(await client.workspaces({ labels: { team, nope: true } })), []);
    assert.deepEqual(ids(await client.workspaces({ name: named.name })), [named.id]);
    assert.deepEqual(ids(await client.workspaces({ labels: { team }, state: "ready" })), [named.id, other.id].sort());
    assert.deepEqual(ids(await client.workspaces({ labels: { team }, state: "paused" })), []);
    // Positive control: unfiltered, both and more.
    const all = ids(await client.workspaces());
    assert.ok(all.includes(named.id) && all.includes(other.id));
    await assert.rejects(client.workspaces({ labels: ["Bad Key"] }), (e) => e instanceof StationError && e.status === 400 && e.field === "label");
  } finally {
    await client.deleteWorkspace(other.id);
    await client.updateWorkspace(named.id, { labels: { team: "a" } });
  }
});

test("updateWorkspace renames and merges labels", async () => {
  const w = await client.createWorkspace({ adapter: "host", labels: { a: "1", b: "2" } });
  try {
    const n = uniq("renamed");
    let got = await client.updateWorkspace(w.id, { name: n, labels: { b: null, c: "3" } });
    assert.equal(got.name, n);
    assert.deepEqual(got.labels, { a: "1", c: "3" });
    got = await client.updateWorkspace(n, { labels: { a: "9" } });
    assert.deepEqual(got.labels, { a: "9", c: "3" });
    got = await client.updateWorkspace(w.id, { name: null });
    assert.equal(got.name, null);
    await assert.rejects(client.workspace(n), (e) => e instanceof StationError && e.status === 404);
    assert.throws(() => client.updateWorkspace(w.id, {}), TypeError);
  } finally {
    await client.deleteWorkspace(w.id);
  }
});

test("with a worker list a name is looked up on every worker; on two it is an error naming both", async () => {
  const fleet = new StationClient({
    workers: [
      { name: named.worker, url: `unix:${SOCKET}` },
      { name: "w2", url: stubUrl, token: "x" },
    ],
  });
  // Only the real worker has it: found there, and calls by name go there.
  assert.equal((await fleet.workspace(named.name)).id, named.id);
  assert.equal((await fleet.updateWorkspace(named.name, { labels: { seen: "yes" } })).labels.seen, "yes");
  assert.deepEqual(ids(await fleet.workspaces({ labels: { seen: "yes" } })), [named.id]);
  const run = await fleet.startCommand(named.name, { command: "echo there" }, { waitMs: 10_000 });
  assert.equal(run.stdout, "there\n");
  await assert.rejects(fleet.workspace("nothing-here"), { status: 404, message: "no worker has a workspace named 'nothing-here'" });
  // Both have it.
  const other = `w2-${"a".repeat(26)}`;
  holds.set(named.name, other);
  try {
    await assert.rejects(fleet.workspace(named.name), (e) => {
      assert.ok(e instanceof StationError);
      assert.equal(e.code, "invalid_argument");
      assert.equal(e.message, `workspace name '${named.name}' is on several workers: ${named.worker} (${named.id}), w2 (${other}); use the id`);
      return true;
    });
    // An id still routes by its worker.
    assert.equal((await fleet.workspace(named.id)).id, named.id);
  } finally {
    holds.clear();
  }
  await fleet.updateWorkspace(named.id, { labels: { seen: null } });
});
