// The seed's example on a container workspace: the busybox test image (imported here through
// the SDK), the repository's seccomp profile, no network.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { ContainerSandboxAdapter, StationClient } from "station-sandbox/container";
import { DEFAULT_IMAGE, IMAGE_LAYOUT, ROOT, SECCOMP, SOCKET, until } from "./env.mjs";

const skip = IMAGE_LAYOUT
  ? false
  : process.env.STATION_TEST_CONTAINER_SKIP || "no container test image (STATION_TEST_IMAGE_LAYOUT not set)";
let image; // busybox@sha256:…
const made = [];

before(async () => {
  if (skip) return;
  const img = await new StationClient({ socketPath: SOCKET }).importImage({ path: IMAGE_LAYOUT, name: "busybox" });
  assert.match(img.digest, /^sha256:[0-9a-f]{64}$/);
  assert.equal(img.name, "busybox");
  image = `busybox@${img.digest}`;
});

after(async () => {
  const c = new StationClient({ socketPath: SOCKET });
  for (const id of made) await c.deleteWorkspace(id).catch(() => {});
});

test("container: the seed's flow (image by digest, seccomp profile, network none, limits)", { skip }, async () => {
  const sandboxes = new ContainerSandboxAdapter({
    rootDir: ROOT,
    image,
    seccompProfile: SECCOMP,
    network: "none",
    cpus: 1,
    memoryMb: 1024,
    pidsLimit: 128,
  });
  const report = await sandboxes.ready();
  assert.equal(report.checks.find((c) => c.name === "runtime")?.ok, true);
  const workspace = await sandboxes.create();
  made.push(workspace.id);
  assert.equal(workspace.adapter, "container");
  assert.equal(workspace.image, image);
  assert.equal(workspace.seccompProfile, SECCOMP);
  assert.match(workspace.seccompDigest, /^sha256:[0-9a-f]{64}$/);
  assert.equal(workspace.network, "none");
  assert.equal(workspace.cpus, 1);
  assert.equal(workspace.memoryMb, 1024);
  assert.equal(workspace.pidsLimit, 128);

  const run = await sandboxes.exec(workspace.id, { command: "echo hi && pwd", timeoutMs: 10_000 });
  assert.equal(run.status, "running");
  let current = await sandboxes.command(workspace.id, run.id);
  for (let i = 0; current.status === "running" && i < 100; i++) {
    current = await sandboxes.command(workspace.id, run.id, { waitMs: 1000 });
  }
  assert.equal(current.status, "exited", JSON.stringify(current));
  assert.equal(current.exitCode, 0);
  assert.equal(current.stdout, "hi\n/home/node/workspace\n");
  assert.equal(current.truncated, false);

  // The service half of the seed.
  const service = await sandboxes.startService(workspace.id, {
    name: "agent-gateway",
    // The marker is made after the echo, so once it exists "up\n" is in the output pipe and
    // the agent drains it when the stop ends the attempt.
    command: "echo up; touch .up; exec sleep 60",
    restart: { policy: "on-failure", maxRestarts: 5, delayMs: 1000 },
  });
  assert.equal(service.id, "agent-gateway");
  await until("the service running", async () => (await sandboxes.service(workspace.id, service.id)).state === "running");
  await until("the service's echo", async () => {
    const probe = await sandboxes.exec(workspace.id, { command: "test -e .up", timeoutMs: 10_000 });
    let r = probe;
    while (r.status === "running") r = await sandboxes.command(workspace.id, probe.id, { waitMs: 1000 });
    return r.exitCode === 0;
  });
  const s = await sandboxes.stopService(workspace.id, service.id);
  assert.equal(s.state, "stopped", "stopService resolves once the service is stopped");
  assert.equal(s.attempts.length, 1);
  assert.equal(s.attempts[0].endReason, "stopped");
  assert.equal(s.attempts[0].stdout, "up\n");

  assert.deepEqual(await sandboxes.delete(workspace.id), { id: workspace.id, state: "deleted" });
});

test("container: no image given: the worker's default image (--default-image)", { skip }, async () => {
  assert.equal(image, DEFAULT_IMAGE, "the worker's default is the imported test image");
  const sandboxes = new ContainerSandboxAdapter({ rootDir: ROOT, seccompProfile: SECCOMP });
  assert.equal(sandboxes.image, undefined);
  // The worker's image check matters to an adapter that takes the worker's image.
  const report = await sandboxes.ready();
  assert.deepEqual(
    report.checks.find((c) => c.name === "image"),
    { name: "image", ok: true, message: DEFAULT_IMAGE },
  );
  const workspace = await sandboxes.create();
  made.push(workspace.id);
  assert.equal(workspace.adapter, "container");
  assert.equal(workspace.image, DEFAULT_IMAGE);
  let run = await sandboxes.exec(workspace.id, { command: "busybox | head -n 1 | cut -c 1-7", timeoutMs: 10_000 });
  while (run.status === "running") run = await sandboxes.command(workspace.id, run.id, { waitMs: 1000 });
  assert.equal(run.exitCode, 0, JSON.stringify(run));
  assert.equal(run.stdout, "BusyBox\n");
  assert.deepEqual(await sandboxes.delete(workspace.id), { id: workspace.id, state: "deleted" });
  // An empty name is a mistake, not "the default".
  assert.throws(() => new ContainerSandboxAdapter({ rootDir: ROOT, image: "" }), TypeError);
});

test("container: an image not in the store fails create with 400 naming image", { skip }, async () => {
  const sandboxes = new ContainerSandboxAdapter({ rootDir: ROOT, image: "busybox@sha256:" + "1".repeat(64) });
  await assert.rejects(sandboxes.create(), { status: 400, code: "invalid_argument", field: "image" });
});
