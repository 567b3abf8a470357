// Deadlines (README, "Deadlines") against test/integration/hang-worker.py, run by
// test/integration/test-sdk-deadlines.sh with:
//   STATION_TEST_URL, STATION_TEST_TOKEN     a real controller (worker "test") over TCP
//   STATION_TEST_WS                          a ready workspace on it
//   STATION_TEST_HANG_SILENT, …_STALL_BODY, …_START_ONLY, …_QUIET_STREAM   the hang workers' URLs
// A worker that accepts and never answers makes each call fail within its deadline (2 s here)
// with an error naming it; the real controller with the same deadline answers, long-polls held
// longer than it and a quiet event stream included.
import { test } from "node:test";
import assert from "node:assert/strict";

import { StationClient, StationError, WorkerUnavailableError } from "../dist/index.js";

const URL_ = process.env.STATION_TEST_URL;
const TOKEN = process.env.STATION_TEST_TOKEN;
const WS = process.env.STATION_TEST_WS;
const HANG = {
  silent: process.env.STATION_TEST_HANG_SILENT,
  "stall-body": process.env.STATION_TEST_HANG_STALL_BODY,
  "start-only": process.env.STATION_TEST_HANG_START_ONLY,
  "quiet-stream": process.env.STATION_TEST_HANG_QUIET_STREAM,
};
if (!URL_ || !TOKEN || !WS || Object.values(HANG).some((u) => !u))
  throw new Error("STATION_TEST_URL/TOKEN/WS/HANG_* not set: run test/integration/test-sdk-deadlines.sh");

const T = 2000;
const HUNG_ID = "w2-aaaaaaaaaaaaaaaaaaaaaaaaaa";

/** A client over the real controller ("test") and a hang worker ("w2") in mode. */
function fleet(mode, options = { timeoutMs: T }) {
  return new StationClient({
    ...options,
    workers: [
      { name: "test", url: URL_, token: TOKEN },
      { name: "w2", url: HANG[mode], token: "x" },
    ],
  });
}

/** Runs fn, which must reject: the error and how long it took (ms). */
async function failure(fn) {
  const started = Date.now();
  try {
    await fn();
  } catch (e) {
    return { e, ms: Date.now() - started };
  }
  assert.fail("it did not fail");
}

/** The error names w2 in mode, and the deadline, as the C library does. */
function namesW2(e, mode, seconds) {
  assert.ok(e instanceof WorkerUnavailableError, `a WorkerUnavailableError, not ${e}`);
  assert.equal(e.code, "timeout");
  assert.equal(e.worker, "w2");
  assert.equal(e.message, `worker w2 (${HANG[mode]}) did not answer within ${seconds} s`);
}

for (const mode of ["silent", "stall-body"]) {
  test(`${mode}: calls on a w2 id fail within the deadline, naming w2`, async () => {
    const c = fleet(mode);
    let { e, ms } = await failure(() => c.workspace(HUNG_ID));
    namesW2(e, mode, 2);
    assert.ok(ms < 10000, `workspace(): ${ms} ms`);
    ({ e, ms } = await failure(() => c.command(HUNG_ID, "r1")));
    namesW2(e, mode, 2);
    assert.ok(ms < 10000, `command(): ${ms} ms`);
    // a long-poll's head may take the 2 s plus what it asked the server to hold; once begun,
    // the body may be silent 2 s
    ({ e, ms } = await failure(() => c.startCommand(HUNG_ID, { command: "true" }, { waitMs: 1000, retries: 0 })));
    namesW2(e, mode, mode === "silent" ? 3 : 2);
    assert.ok(ms >= (mode === "silent" ? 2900 : 1900) && ms < 12000, `startCommand(waitMs 1000): ${ms} ms`);
  });

  test(`${mode}: workspaces() lists the real worker's and names w2`, async () => {
    const c = fleet(mode);
    const started = Date.now();
    const list = await c.workspaces();
    assert.ok(Date.now() - started < 10000, `${Date.now() - started} ms`);
    assert.ok(list.some((w) => w.id === WS), "the real worker's workspace is listed");
    assert.deepEqual(list.unreachable, [{ worker: "w2", url: HANG[mode], error: "no answer within 2 s" }]);
    const states = await c.workers();
    assert.deepEqual(
      states.map((s) => [s.name, s.up, s.error]),
      [
        ["test", true, undefined],
        ["w2", false, "no answer within 2 s"],
      ],
    );
  });
}

test("start-only: the follow and the cancel of a started run fail in time, naming w2", async () => {
  const c = fleet("start-only");
  const run = await c.startCommand(HUNG_ID, { command: "sleep 100" }, { retries: 0 });
  assert.equal(run.id, "r1");
  let { e, ms } = await failure(() => c.followOutput(HUNG_ID, "r1"));
  namesW2(e, "start-only", 2);
  assert.ok(ms < 10000, `followOutput(): ${ms} ms`);
  // the cancel's own deadline: the 10 s the server may hold it, plus 5 s
  ({ e, ms } = await failure(() => c.cancelCommand(HUNG_ID, "r1")));
  namesW2(e, "start-only", 15);
  assert.ok(ms >= 14900 && ms < 25000, `cancelCommand(): ${ms} ms`);
});

test("quiet-stream: an event stream silent past the deadline and the heartbeat fails, naming w2", async () => {
  const c = fleet("quiet-stream");
  const { e, ms } = await failure(async () => {
    for await (const _ of c.watchFiles(HUNG_ID, "/")) {
      // nothing comes
    }
  });
  namesW2(e, "quiet-stream", 17);
  assert.ok(ms >= 16900 && ms < 30000, `watchFiles(): ${ms} ms`);
});

test("one controller that never answers: a timeout naming its URL", async () => {
  const c = new StationClient({ url: HANG.silent, token: "x", timeoutMs: T });
  const { e, ms } = await failure(() => c.worker());
  assert.ok(e instanceof StationError && !(e instanceof WorkerUnavailableError), String(e));
  assert.equal(e.code, "timeout");
  assert.equal(e.message, `${new URL(HANG.silent)} did not answer within 2 s`);
  assert.ok(ms < 10000, `${ms} ms`);
});

test("STATION_TIMEOUT_MS gives the deadline when timeoutMs is not given", async () => {
  const saved = process.env.STATION_TIMEOUT_MS;
  process.env.STATION_TIMEOUT_MS = "1500";
  try {
    const c = fleet("silent", {});
    const { e, ms } = await failure(() => c.workspace(HUNG_ID));
    namesW2(e, "silent", 1.5);
    assert.ok(ms >= 1400 && ms < 10000, `${ms} ms`);
  } finally {
    if (saved === undefined) delete process.env.STATION_TIMEOUT_MS;
    else process.env.STATION_TIMEOUT_MS = saved;
  }
});

// Positive controls: the real controller, the same 2 s deadline.

test("control: the real worker answers with the same deadline", async () => {
  const c = fleet("silent");
  assert.equal((await c.workspace(WS)).id, WS);
  assert.equal((await c.on("test").worker()).name, "test");
});

test("control: a long-poll held longer than the deadline succeeds", async () => {
  const c = fleet("silent");
  const started = Date.now();
  const run = await c.startCommand(WS, { command: "sleep 3" }, { waitMs: 10000 });
  assert.equal(run.status, "exited", JSON.stringify(run));
  assert.equal(run.exitCode, 0);
  assert.ok(Date.now() - started >= 3000, `${Date.now() - started} ms`);
});

test("control: a followed run silent for 3 s succeeds", async () => {
  const c = fleet("silent");
  const run = await c.startCommand(WS, { command: "sleep 3; echo late" });
  let out = "";
  const end = await c.followOutput(WS, run.id, { onOutput: (o) => (out += o.data.toString()) });
  assert.equal(end.exitCode, 0);
  assert.equal(out, "late\n");
});

test("control: a quiet event stream stays open past the deadline (the heartbeat)", async () => {
  const c = new StationClient({ url: URL_, token: TOKEN, timeoutMs: T });
  const ac = new AbortController();
  let err;
  const done = (async () => {
    try {
      for await (const _ of c.watchFiles(WS, ".", { signal: ac.signal })) {
        // whatever comes; the stream must not end
      }
    } catch (e) {
      err = e;
    }
    return "ended";
  })();
  const held = await Promise.race([done, new Promise((r) => setTimeout(() => r("open"), 20000))]);
  ac.abort();
  await done;
  assert.equal(held, "open", `the stream ended within 20 s: ${err?.message}`);
});
