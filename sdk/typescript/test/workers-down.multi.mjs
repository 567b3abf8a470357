// Three workers, w2 stopped: lists name it and carry w1's and w3's workspaces, calls on a w2 id
// throw a WorkerUnavailableError naming w2, creates skip it; w1 and w3 are still served.
import assert from "node:assert/strict";
import { test } from "node:test";

import { HostSandboxAdapter, StationClient, WorkerUnavailableError } from "station-sandbox/host";
import { OPTION, W } from "./workers-env.mjs";

const IDS = Object.fromEntries((process.env.STATION_TEST_IDS ?? "").split(",").filter(Boolean).map((id) => [id.slice(0, 2), id]));
if (!IDS.w1 || !IDS.w2 || !IDS.w3) throw new Error("STATION_TEST_IDS (an id on each of w1, w2, w3) not set");

const isW2Down = (e) => {
  assert.ok(e instanceof WorkerUnavailableError, `a WorkerUnavailableError, not ${e}`);
  assert.equal(e.worker, "w2");
  assert.equal(e.url, W.w2.url);
  assert.equal(e.message, `worker w2 (${W.w2.url}) did not answer: connection refused`);
  return true;
};

test("workers down: the list has w1's and w3's workspaces and names w2", async () => {
  const c = new StationClient({ workers: OPTION });
  const list = await c.workspaces();
  assert.deepEqual(list.unreachable, [{ worker: "w2", url: W.w2.url, error: "connection refused" }]);
  const ids = list.map((w) => w.id);
  assert.ok(ids.includes(IDS.w1) && ids.includes(IDS.w3), ids.join(" "));
  assert.ok(!ids.includes(IDS.w2));
  const states = await c.workers();
  assert.deepEqual(states.map((s) => [s.name, s.up]), [["w1", true], ["w2", false], ["w3", true]]);
  assert.equal(states[1].error, "connection refused");
});

test("workers down: a call on a w2 id throws WorkerUnavailableError naming w2", async () => {
  const sandboxes = new HostSandboxAdapter({ workers: OPTION });
  await assert.rejects(sandboxes.workspace(IDS.w2), isW2Down);
  await assert.rejects(sandboxes.exec(IDS.w2, { command: "true", retries: 0 }), isW2Down);
  await assert.rejects(sandboxes.client.commands(IDS.w2), isW2Down);
  await assert.rejects(sandboxes.files.read(IDS.w2, "x"), isW2Down);
  await assert.rejects(sandboxes.delete(IDS.w2), isW2Down);
  await assert.rejects(sandboxes.create({}, { worker: "w2", retries: 0 }), isW2Down);
});

test("workers down: w1 and w3 are still served; a create without a worker skips w2", async () => {
  const sandboxes = new HostSandboxAdapter({ workers: OPTION });
  for (const id of [IDS.w1, IDS.w3]) {
    const run = await sandboxes.exec(id, { command: "echo still" });
    assert.equal((await sandboxes.wait(id, run.id)).stdout, "still\n");
  }
  // w2 has the most free slots but does not answer: w3 is next
  const ws = await sandboxes.create();
  try {
    assert.equal(ws.worker, "w3");
  } finally {
    await sandboxes.delete(ws.id);
  }
  const on1 = await sandboxes.create({}, { worker: "w1" });
  assert.equal(on1.worker, "w1");
  await sandboxes.delete(on1.id);
});

test("workers down: no worker answering is an error naming them", async () => {
  const c = new StationClient({ workers: [{ name: "w2", url: W.w2.url, token: W.w2.token }] });
  await assert.rejects(c.workspaces(), (e) => e instanceof WorkerUnavailableError && e.worker === "w2" && /no worker answered: w2 \(.*\): connection refused/.test(e.message));
  await assert.rejects(c.createWorkspace(), (e) => e instanceof WorkerUnavailableError && /no worker answered/.test(e.message));
});
