// TCP listeners need the bearer token: with it the SDK works, without it every call is 401.
import assert from "node:assert/strict";
import { test } from "node:test";

import { HostSandboxAdapter, StationClient } from "station-sandbox/host";
import { TOKEN, URL } from "./env.mjs";

const skip = URL && TOKEN ? false : "no TCP listener (STATION_URL and STATION_TOKEN not set)";

test("tcp: the seed's flow with the bearer token", { skip }, async () => {
  const sandboxes = new HostSandboxAdapter({ url: URL, token: TOKEN });
  await sandboxes.ready();
  const workspace = await sandboxes.create();
  try {
    const run = await sandboxes.exec(workspace.id, { command: "echo tcp", timeoutMs: 10_000 });
    assert.equal(run.status, "running");
    const r = await sandboxes.wait(workspace.id, run.id);
    assert.equal(r.status, "exited");
    assert.equal(r.stdout, "tcp\n");
    const chunks = [];
    await sandboxes.followOutput(workspace.id, run.id, { onStdout: (d) => chunks.push(d) });
    assert.equal(Buffer.concat(chunks).toString(), "tcp\n");
  } finally {
    await sandboxes.delete(workspace.id);
  }
});

test("tcp: without the token, or with a wrong one, is 401 unauthorized", { skip }, async () => {
  const saved = process.env.STATION_TOKEN;
  delete process.env.STATION_TOKEN; // else the client would fall back to it
  try {
    for (const token of [undefined, "not-the-token", TOKEN + "x"]) {
      const c = new StationClient({ url: URL, token });
      await assert.rejects(c.worker(), { name: "StationError", status: 401, code: "unauthorized" });
      await assert.rejects(new HostSandboxAdapter({ client: c }).create(), { status: 401 });
    }
  } finally {
    if (saved !== undefined) process.env.STATION_TOKEN = saved;
  }
});
