// The SDK against a real controller, host adapter: the seed's flow, every terminal status the
// tests can provoke, output decoding, errors, services, live output, terminals.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { HostSandboxAdapter, StationClient, StationError } from "station-sandbox/host";
import { ContainerSandboxAdapter } from "station-sandbox/container";
import * as root from "station-sandbox";
import { ROOT, SOCKET, until } from "./env.mjs";

const sandboxes = new HostSandboxAdapter({ rootDir: ROOT });
let ws; // one workspace for most tests

before(async () => {
  ws = await sandboxes.create();
});

after(async () => {
  if (ws) await sandboxes.delete(ws.id).catch(() => {});
});

test("host: the seed's flow (ready, create, exec returns running, command reaches exited)", async () => {
  const report = await sandboxes.ready();
  assert.equal(report.ready, true);
  assert.ok(report.checks.some((c) => c.name === "agent" && c.ok));

  const workspace = await sandboxes.create();
  try {
    assert.match(workspace.id, /^test-[a-z2-7]{26}$/);
    assert.equal(workspace.adapter, "host");
    assert.equal(workspace.state, "ready");
    const run = await sandboxes.exec(workspace.id, { command: "sleep 0.2; node --version && pwd", timeoutMs: 10_000 });
    assert.match(run.id, /^r-[a-z2-7]{26}$/);
    assert.equal(run.status, "running", "a run id is not success: the handle is running");
    assert.equal(run.exitCode, null);
    let current = await sandboxes.command(workspace.id, run.id);
    for (let i = 0; current.status === "running" && i < 100; i++) {
      current = await sandboxes.command(workspace.id, run.id, { waitMs: 1000 });
    }
    assert.equal(current.status, "exited");
    assert.equal(current.exitCode, 0);
    assert.equal(current.encoding, "utf-8");
    assert.equal(current.stdout, `${process.version}\n${workspace.workdir}\n`);
    assert.equal(current.stderr, "");
    assert.equal(current.stdoutBytes, Buffer.byteLength(current.stdout));
    assert.equal(current.truncated, false);
    assert.equal(typeof current.durationMs, "number");
  } finally {
    assert.deepEqual(await sandboxes.delete(workspace.id), { id: workspace.id, state: "deleted" });
  }
  await assert.rejects(sandboxes.workspace(workspace.id), { name: "StationError", status: 404, code: "not_found" });
});

test("host: both streams, exit code and byte counts", async () => {
  const run = await sandboxes.exec(ws.id, { command: "echo out; echo err >&2; exit 3" });
  const r = await sandboxes.wait(ws.id, run.id);
  assert.equal(r.status, "exited");
  assert.equal(r.exitCode, 3);
  assert.equal(r.stdout, "out\n");
  assert.equal(r.stderr, "err\n");
  assert.equal(r.stdoutBytes, 4);
  assert.equal(r.stderrBytes, 4);
  assert.equal(r.signal, null);
});

test("host: a timeout ends timed_out", async () => {
  const run = await sandboxes.exec(ws.id, { command: "echo started; sleep 30", timeoutMs: 300 });
  const r = await sandboxes.wait(ws.id, run.id, { timeoutMs: 20_000 });
  assert.equal(r.status, "timed_out");
  assert.equal(r.exitCode, null);
  assert.equal(r.stdout, "started\n");
  assert.ok(r.durationMs >= 300 && r.durationMs < 10_000, `durationMs ${r.durationMs}`);
});

test("host: wait with timeoutMs resolves with the run still running; cancel ends it cancelled", async () => {
  const run = await sandboxes.exec(ws.id, { command: "sleep 30" });
  const t0 = Date.now();
  const r = await sandboxes.wait(ws.id, run.id, { timeoutMs: 300 });
  assert.equal(r.status, "running");
  assert.ok(Date.now() - t0 >= 250, "waited about timeoutMs");
  const c = await sandboxes.cancel(ws.id, run.id);
  assert.equal(c.status, "cancelled");
  await assert.rejects(sandboxes.cancel(ws.id, run.id), { status: 409, code: "conflict" });
});

test("host: overflowing output keeps head and tail and sets truncated", async () => {
  // 40 H, 920 m, 40 T: with maxOutputBytes 64 the head is 32 H and the tail 32 T.
  const run = await sandboxes.exec(ws.id, {
    command: "printf 'H%.0s' $(seq 40); head -c 920 /dev/zero | tr '\\0' m; printf 'T%.0s' $(seq 40)",
    maxOutputBytes: 64,
  });
  const r = await sandboxes.wait(ws.id, run.id);
  assert.equal(r.status, "exited");
  assert.equal(r.truncated, true);
  assert.equal(r.stdoutBytes, 1000);
  assert.equal(r.stdout, "H".repeat(32));
  assert.equal(r.stdoutTail, "T".repeat(32));
  assert.equal(r.stderrTail, undefined);
});

test("host: binary output is decoded into Buffers", async () => {
  const run = await sandboxes.exec(ws.id, { command: "printf 'a\\000b\\377'; printf '\\001' >&2" });
  const r = await sandboxes.wait(ws.id, run.id);
  assert.equal(r.status, "exited");
  assert.equal(r.encoding, "base64");
  assert.ok(Buffer.isBuffer(r.stdout));
  assert.deepEqual(r.stdout, Buffer.from([0x61, 0x00, 0x62, 0xff]));
  assert.deepEqual(r.stderr, Buffer.from([0x01]));
  assert.equal(r.stdoutBytes, 4);
});

test("host: stdin as text and as bytes; cwd and env", async () => {
  let r = await sandboxes.wait(ws.id, (await sandboxes.exec(ws.id, { command: "cat", stdin: "héllo" })).id);
  assert.equal(r.stdout, "héllo");
  r = await sandboxes.wait(ws.id, (await sandboxes.exec(ws.id, { command: "cat", stdin: new Uint8Array([0, 255, 1]) })).id);
  assert.deepEqual(r.stdout, Buffer.from([0, 255, 1]));
  r = await sandboxes.wait(
    ws.id,
    (await sandboxes.exec(ws.id, { command: "mkdir -p sub && cd sub && pwd", cwd: ws.workdir })).id,
  );
  assert.equal(r.stdout, `${ws.workdir}/sub\n`);
  const withEnv = await sandboxes.exec(ws.id, { command: "pwd; echo $K", cwd: "sub", env: { K: "v" } });
  r = await sandboxes.wait(ws.id, withEnv.id);
  assert.equal(r.stdout, `${ws.workdir}/sub\nv\n`);
});

test("host: errors are StationErrors with status, code and field", async () => {
  await assert.rejects(sandboxes.exec("test-nosuchworkspaceaaaaaaaaaa", { command: "true" }), (e) => {
    assert.ok(e instanceof StationError);
    assert.equal(e.status, 404);
    assert.equal(e.code, "not_found");
    assert.equal(e.field, undefined);
    assert.match(e.message, /workspace/);
    return true;
  });
  await assert.rejects(sandboxes.command(ws.id, "r-aaaaaaaaaaaaaaaaaaaaaaaaaa"), { status: 404, code: "not_found" });
  await assert.rejects(sandboxes.exec(ws.id, { command: "true", timeoutMs: 0 }), {
    status: 400,
    code: "invalid_argument",
    field: "timeoutMs",
  });
  await assert.rejects(sandboxes.exec(ws.id, { command: "" }), { status: 400, code: "invalid_argument", field: "command" });
  await assert.rejects(sandboxes.startService(ws.id, { name: "Bad Name", command: "true" }), {
    status: 400,
    field: "name",
  });
  await assert.rejects(
    sandboxes.startService(ws.id, { name: "p", command: "true", restart: { policy: "sometimes" } }),
    { status: 400, field: "restart.policy" },
  );
  // A host workspace has no image: 400 naming the field.
  await assert.rejects(sandboxes.client.createWorkspace({ adapter: "host", image: "busybox@sha256:" + "0".repeat(64) }), {
    status: 400,
    field: "image",
  });
  // Nobody listening: status 0, connection_failed.
  const nowhere = new StationClient({ socketPath: join(ROOT, "no-such.sock") });
  await assert.rejects(nowhere.worker(), { status: 0, code: "connection_failed" });
});

test("host: ready() of a container adapter names what is missing", async () => {
  const c = new ContainerSandboxAdapter({ socketPath: SOCKET, image: "busybox@sha256:" + "0".repeat(64) });
  await assert.rejects(c.ready(), (e) => {
    assert.ok(e instanceof StationError);
    assert.equal(e.status, 503);
    assert.equal(e.code, "unavailable");
    assert.match(e.message, /image: busybox@sha256:0{64} is not in the worker's image store/);
    return true;
  });
  const tag = new ContainerSandboxAdapter({ socketPath: SOCKET, image: "busybox:latest" });
  await assert.rejects(tag.ready(), /not pinned by digest/);
  assert.throws(() => new ContainerSandboxAdapter({ socketPath: SOCKET, image: "" }), TypeError);
});

test("host: followOutput delivers output while the run is still running", async () => {
  const flag = join(ws.workdir, "go");
  // The run cannot end before the test has seen "one" and made the file (or 10 s pass).
  const run = await sandboxes.exec(ws.id, {
    command: "echo one; while [ ! -e go ]; do sleep 0.02; done; echo two >&2; echo three",
    timeoutMs: 10_000,
  });
  const seen = [];
  const gaps = [];
  const end = await sandboxes.followOutput(ws.id, run.id, {
    onStdout: (d, offset) => {
      seen.push(["stdout", offset, d.toString()]);
      if (d.toString().includes("one")) writeFileSync(flag, "");
    },
    onStderr: (d, offset) => seen.push(["stderr", offset, d.toString()]),
    onGap: (g) => gaps.push(g),
  });
  assert.equal(end.status, "exited", JSON.stringify(end));
  assert.equal(end.stdout, "one\nthree\n");
  assert.equal(end.stderr, "two\n");
  assert.deepEqual(gaps, []);
  const out = seen.filter((s) => s[0] === "stdout").map((s) => s[2]).join("");
  assert.equal(out, "one\nthree\n");
  assert.deepEqual(seen.filter((s) => s[0] === "stderr"), [["stderr", 0, "two\n"]]);
  assert.equal(seen[0][2], "one\n");

  // A finished run replays its output, then ends.
  const chunks = [];
  const again = await sandboxes.followOutput(ws.id, run.id, { onStdout: (d) => chunks.push(d) });
  assert.equal(Buffer.concat(chunks).toString(), "one\nthree\n");
  assert.equal(again.status, "exited");

  await assert.rejects(sandboxes.followOutput(ws.id, "r-aaaaaaaaaaaaaaaaaaaaaaaaaa"), { status: 404 });
  // Aborting stops following.
  const slow = await sandboxes.exec(ws.id, { command: "sleep 30" });
  const ac = new AbortController();
  setTimeout(() => ac.abort(), 200);
  await assert.rejects(sandboxes.followOutput(ws.id, slow.id, { signal: ac.signal }), { name: "AbortError" });
  await sandboxes.cancel(ws.id, slow.id);
});

test("host: on-failure service with maxRestarts 2 ends exhausted after 3 attempts", async () => {
  const service = await sandboxes.startService(ws.id, {
    name: "flaky",
    command: "echo up; exit 1",
    restart: { policy: "on-failure", maxRestarts: 2, delayMs: 50 },
  });
  assert.equal(service.id, "flaky", "the service's id is its name");
  assert.match(service.serviceId, /^svc-/);
  assert.equal(service.restart.policy, "on-failure");
  const s = await until("the service to be exhausted", async () => {
    const s = await sandboxes.service(ws.id, service.id);
    return s.state === "exhausted" ? s : null;
  });
  assert.equal(s.attempts.length, 3);
  assert.equal(s.restartCount, 2);
  assert.match(s.reason, /restart limit.*exited with code 1/);
  for (const [i, a] of s.attempts.entries()) {
    assert.equal(a.number, i + 1);
    assert.equal(a.endReason, "exited");
    assert.equal(a.exitCode, 1);
    assert.equal(a.stdout, "up\n");
  }
  const listed = await sandboxes.services(ws.id);
  assert.deepEqual(listed.map((x) => x.id), ["flaky"]);
  assert.equal(listed[0].attempts[0].stdout, undefined, "list attempts carry no output");
  // The newest attempt's stored output as logs.
  const logs = [];
  const end = await sandboxes.client.serviceLogs(ws.id, "flaky", { onOutput: (c) => logs.push(c.data.toString()) });
  assert.equal(logs.join(""), "up\n");
  assert.equal(end.state, "exhausted");
  assert.deepEqual(await sandboxes.deleteService(ws.id, "flaky"), { name: "flaky", deleted: true });
});

test("host: a service runs, restarts and stops on request", async () => {
  const service = await sandboxes.startService(ws.id, {
    name: "web",
    command: "echo serving; exec sleep 60",
    restart: { policy: "always", maxRestarts: 5, delayMs: 1000 },
  });
  await until("web running", async () => (await sandboxes.service(ws.id, service.id)).state === "running");
  const r = await sandboxes.restartService(ws.id, service.id);
  assert.equal(r.id, "web");
  const two = await until("a second attempt", async () => {
    const s = await sandboxes.service(ws.id, service.id);
    return s.state === "running" && s.currentAttempt === 2 ? s : null;
  });
  assert.equal(two.attempts[0].endReason, "restarted");
  assert.equal(two.attempts[0].state, "ended");
  // The running attempt is listed last, with the bytes it wrote so far ("serving\n").
  const live = await until("attempt 2 listed running with its 8 bytes", async () => {
    const s = await sandboxes.service(ws.id, service.id);
    const a = s.attempts.at(-1);
    return a.number === 2 && a.state === "running" && a.stdoutBytes === 8 ? s : null;
  });
  assert.deepEqual(live.attempts.map((a) => [a.number, a.state]), [[1, "ended"], [2, "running"]]);
  assert.equal(live.attempts[1].pid, live.mainPid);
  assert.equal(live.attempts[1].stderrBytes, 0);
  assert.equal(live.attempts[1].endedAt, undefined, "no end fields while it runs");
  const stopped = await sandboxes.stopService(ws.id, service.id);
  assert.equal(stopped.id, "web");
  assert.equal(stopped.state, "stopped", "stopService resolves once the service is stopped");
  assert.equal(stopped.stopping, false);
  assert.equal(stopped.attempts.at(-1).endReason, "stopped");
  assert.deepEqual(stopped.attempts.map((a) => [a.number, a.state, a.stdoutBytes]), [[1, "ended", 8], [2, "ended", 8]]);
  assert.equal(stopped.reason, "stopped on request");
  await assert.rejects(sandboxes.service(ws.id, "nope"), { status: 404, code: "not_found" });
});

test("host: a service's logs followed right after its start get its first line, 10 of 10", async () => {
  const misses = [];
  for (let i = 0; i < 10; i++) {
    await sandboxes.startService(ws.id, { name: `quick${i}`, command: `echo first-${i}; sleep 0.5` });
    const out = [];
    const gaps = [];
    await sandboxes.client.serviceLogs(ws.id, `quick${i}`, {
      follow: true,
      onOutput: (c) => out.push(c.data.toString()),
      onGap: (g) => gaps.push(g),
    });
    if (out.join("") !== `first-${i}\n` || gaps.length) misses.push({ i, out: out.join(""), gaps });
    await sandboxes.deleteService(ws.id, `quick${i}`);
  }
  assert.deepEqual(misses, [], "follows that missed the first line");
});

test("host: two followers of a running service each get its first line, then live output, no gap", async () => {
  await sandboxes.startService(ws.id, {
    name: "pair",
    command: "echo first-line; while [ ! -e go-pair ]; do sleep 0.05; done; echo last-line",
  });
  await until("pair running with its first line written", async () => {
    const s = await sandboxes.service(ws.id, "pair");
    return s.state === "running" && s.attempts.at(-1).stdoutBytes === 11;
  });
  const follow = () => {
    const f = { out: [], gaps: [] };
    f.done = sandboxes.client.serviceLogs(ws.id, "pair", {
      follow: true,
      onOutput: (c) => f.out.push(c.data.toString()),
      onGap: (g) => f.gaps.push(g),
    });
    return f;
  };
  const one = follow();
  await until("follower 1's first output", async () => one.out.length > 0);
  const two = follow();
  await until("follower 2's first output", async () => two.out.length > 0 || two.gaps.length > 0);
  writeFileSync(join(ws.workdir, "go-pair"), "");
  await Promise.all([one.done, two.done]);
  for (const [n, f] of [["1", one], ["2", two]]) {
    assert.equal(f.out.join(""), "first-line\nlast-line\n", `follower ${n}: stdout`);
    assert.deepEqual(f.gaps, [], `follower ${n}: no gap`);
  }
  await sandboxes.deleteService(ws.id, "pair");
});

test("host: terminal create, attach, write, resize, close", async () => {
  const c = sandboxes.client;
  const t = await c.createTerminal(ws.id, { command: "cat", cols: 80, rows: 24 });
  assert.equal(t.state, "running");
  let out = "";
  let exit;
  const session = await c.attachTerminal(ws.id, t.id, { onData: (d) => (out += d.toString()), onExit: (e) => (exit = e) });
  session.write("ping-pong\n");
  await until("the echo", () => out.includes("ping-pong\r\n"));
  session.resize(100, 30);
  await until("the resize", async () => (await c.terminal(ws.id, t.id)).cols === 100);
  assert.equal((await c.resizeTerminal(ws.id, t.id, { cols: 90, rows: 20 })).rows, 20);
  assert.ok((await c.terminals(ws.id)).some((x) => x.id === t.id));
  const closed = await c.closeTerminal(ws.id, t.id);
  assert.equal(closed.state, "closed");
  assert.equal(closed.signal, 9);
  assert.deepEqual(await session.closed, { exitCode: null, signal: 9, state: "closed" });
  assert.deepEqual(exit, { exitCode: null, signal: 9, state: "closed" });
});

test("host: workspace list, restart keeps HOME, worker info", async () => {
  const w = await sandboxes.create({ env: { FOO: "bar" } });
  try {
    assert.deepEqual(w.env, { FOO: "[redacted]" }); // the value reaches commands, not clients
    let r = await sandboxes.wait(w.id, (await sandboxes.exec(w.id, { command: "echo kept > $HOME/f; echo $FOO" })).id);
    assert.equal(r.stdout, "bar\n");
    const restarted = await sandboxes.restart(w.id);
    assert.equal(restarted.id, w.id);
    assert.equal(restarted.state, "ready");
    r = await sandboxes.wait(w.id, (await sandboxes.exec(w.id, { command: "cat $HOME/f" })).id);
    assert.equal(r.stdout, "kept\n");
    assert.ok((await sandboxes.client.workspaces()).some((x) => x.id === w.id));
    const history = await sandboxes.client.commands(w.id, { limit: 1 });
    assert.equal(history.length, 1);
    assert.equal(history[0].command, "cat $HOME/f");
    assert.equal(history[0].stdout, undefined);
  } finally {
    await sandboxes.delete(w.id);
  }
  const info = await sandboxes.client.worker();
  assert.equal(info.name, "test");
  assert.ok(info.adapters.includes("host"));
  assert.equal(info.limits.maxWaitMs, 60000);
});

test("host: every entry point exports the client, the error and both adapters' types", () => {
  assert.equal(root.StationClient, StationClient);
  assert.equal(root.StationError, StationError);
  assert.equal(root.HostSandboxAdapter, HostSandboxAdapter);
  assert.equal(root.ContainerSandboxAdapter, ContainerSandboxAdapter);
  assert.equal(new StationClient({ rootDir: "/x" }).endpoint, "unix:/x/station.sock");
  assert.equal(new StationClient({ url: "http://127.0.0.1:1" }).endpoint, "http://127.0.0.1:1/");
});

test("host: idleTimeoutMs stops an idle workspace and says why; restart brings it back", async () => {
  const idle = new HostSandboxAdapter({ rootDir: ROOT, idleTimeoutMs: 1000 });
  const w = await idle.create();
  try {
    assert.equal(w.idleTimeoutMs, 1000);
    assert.equal(w.stopReason, null);
    assert.equal(typeof w.lastActivityAt, "string");
    assert.equal(w.procView, "host");
    const stopped = await until("the idle stop", async () => {
      const now = await idle.workspace(w.id);
      return now.state === "stopped" ? now : null;
    }, 60_000);
    assert.equal(stopped.stopReason, "idle");
    assert.match(stopped.reason, /^idle: /);
    const back = await idle.restart(w.id);
    assert.equal(back.state, "ready");
    assert.equal(back.stopReason, null);
  } finally {
    await idle.delete(w.id).catch(() => {});
  }
  await assert.rejects(sandboxes.create({ idleTimeoutMs: 10 }), { name: "StationError", status: 400 });
  const none = await sandboxes.create();
  try {
    assert.equal(none.idleTimeoutMs, 0);
  } finally {
    await sandboxes.delete(none.id);
  }
});

test("host: events() yields a run's changes in order and resumes after since without duplicates", async () => {
  const c = sandboxes.client;
  const run = await sandboxes.exec(ws.id, { command: "echo ev", timeoutMs: 10_000 });
  await until("the run to end", async () => (await sandboxes.command(ws.id, run.id)).status !== "running");
  const seen = [];
  for await (const ev of c.events({ workspace: ws.id, types: ["run"], since: 0 })) {
    seen.push(ev);
    if (ev.id === run.id && ev.change === "ended") break;
  }
  const mine = seen.filter((e) => e.id === run.id).map((e) => `${e.change}:${e.state}`);
  assert.deepEqual(mine, ["created:running", "ended:exited"]);
  const seqs = seen.map((e) => e.seq);
  assert.deepEqual(seqs, [...new Set(seqs)].sort((a, b) => a - b), "seq strictly increasing");
  // From the seq before the last: exactly the last one again.
  const again = [];
  for await (const ev of c.events({ workspace: ws.id, types: ["run"], since: seqs.at(-2) })) {
    again.push(ev);
    break;
  }
  assert.deepEqual(again, [seen.at(-1)]);
  await assert.rejects(c.events({ types: ["bogus"] }).next(), { status: 400, field: "types" });
});
