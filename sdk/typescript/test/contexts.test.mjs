// Code contexts against a real controller, a host workspace (the host's python3-ipykernel and
// python3-matplotlib, from scripts/install-deps): x = 41 then x + 1, onStdout as the cell
// prints, a plot's PNG as a Uint8Array of its figure's size, an error with its traceback, an
// interrupt from another handle keeping x, delete.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { after, before, test } from "node:test";

import { CodeContext, StationClient, StationError } from "station-sandbox";
import { SOCKET, until } from "./env.mjs";

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

let missing = "";
try {
  execFileSync("/usr/bin/python3", ["-c", "import ipykernel, matplotlib"], { stdio: "ignore" });
} catch {
  missing = "python3-ipykernel and python3-matplotlib are needed (scripts/install-deps)";
}
const skip = missing || false;

const client = new StationClient({ socketPath: SOCKET });
let ws;
let ctx;

before(async () => {
  if (missing) return;
  ws = await client.createWorkspace({ adapter: "host" });
  ctx = await client.contexts(ws.id).create("python");
});

after(async () => {
  if (ws) await client.deleteWorkspace(ws.id).catch(() => {});
});

test("contexts: create, then x = 41 and x + 1 gives 42", { skip }, async () => {
  assert.ok(ctx instanceof CodeContext);
  assert.equal(ctx.language, "python");
  assert.equal(ctx.state, "idle");
  assert.match(ctx.id, /^c-/);
  const first = await ctx.execute("x = 41");
  assert.equal(first.status, "ok");
  const second = await ctx.execute("x + 1");
  assert.deepEqual([second.status, second.text, second.error], ["ok", "42", null]);
  assert.equal(second.executionCount, first.executionCount + 1);
  assert.equal(second.results[0].type, "execute_result");
  assert.deepEqual((await client.contexts(ws.id).list()).map((c) => c.id), [ctx.id]);
});

test("contexts: onStdout and onStderr get the output as the cell prints it", { skip }, async () => {
  const seen = [];
  const errs = [];
  const e = await ctx.execute(
    "import sys, time\nprint('a', flush=True)\ntime.sleep(1)\nprint('b')\nprint('oops', file=sys.stderr)",
    { onStdout: (t) => seen.push([t, Date.now()]), onStderr: (t) => errs.push(t) },
  );
  const endedAt = Date.now();
  assert.equal(e.status, "ok");
  assert.equal(seen.map(([t]) => t).join(""), "a\nb\n");
  assert.equal(e.stdout, "a\nb\n");
  assert.equal(errs.join(""), "oops\n");
  assert.equal(e.stderr, "oops\n");
  // 'a' came while the cell slept, not with its end.
  assert.ok(endedAt - seen[0][1] >= 500, `'a' arrived ${endedAt - seen[0][1]} ms before the cell's end`);
});

test("contexts: a plot is a PNG Uint8Array of its figure's size", { skip }, async () => {
  // bbox_inches None: the inline backend's default ("tight") crops the figure
  const e = await ctx.execute(
    "%config InlineBackend.print_figure_kwargs = {'bbox_inches': None}\n" +
      "import matplotlib.pyplot as plt\nfig = plt.figure(figsize=(4, 3), dpi=50)\nplt.plot([1, 2, 3])\nplt.show()",
  );
  assert.equal(e.status, "ok", JSON.stringify(e.error));
  assert.equal(e.images.length, 1);
  const png = e.images[0];
  assert.ok(png instanceof Uint8Array);
  assert.deepEqual([...png.subarray(0, 8)], PNG_SIGNATURE);
  const view = new DataView(png.buffer, png.byteOffset, png.byteLength);
  assert.deepEqual([view.getUint32(16), view.getUint32(20)], [200, 150]);
  assert.equal(e.results[0].png, png);
  assert.equal(e.results[0].type, "display_data");
});

test("contexts: a cell that raised resolves with status error and the traceback", { skip }, async () => {
  const e = await ctx.execute("1 / 0");
  assert.equal(e.status, "error");
  assert.equal(e.error.name, "ZeroDivisionError");
  assert.equal(e.error.value, "division by zero");
  assert.ok(e.error.traceback.some((l) => l.includes("ZeroDivisionError")), JSON.stringify(e.error.traceback));
  assert.equal(e.text, null);
});

test("contexts: interrupt() from another handle stops the cell; x stays", { skip }, async () => {
  let printed = false;
  const running = ctx.execute("print('looping', flush=True)\nwhile True: pass", {
    onStdout: () => {
      printed = true;
    },
  });
  const other = await client.contexts(ws.id).get(ctx.id);
  await until("the cell to print", async () => printed, 30_000);
  assert.equal((await other.refresh()).state, "busy");
  const stopped = await other.interrupt();
  assert.equal(stopped.status, "interrupted");
  const e = await running;
  assert.equal(e.status, "interrupted");
  assert.equal(e.id, stopped.id);
  assert.equal(e.stdout, "looping\n");
  assert.equal(e.error?.name, "KeyboardInterrupt");
  assert.equal((await ctx.execute("x")).text, "41");
  // Nothing runs now: 409.
  await assert.rejects(other.interrupt(), (err) => err instanceof StationError && err.status === 409);
});

test("contexts: interrupt() the moment the context shows busy ends that cell, even before it ran", { skip }, async () => {
  // The context is busy from the execute on, while its code is still being written into the
  // workspace: an interrupt then is kept for the cell, which ends interrupted all the same.
  const running = ctx.execute("while True: pass");
  const other = await client.contexts(ws.id).get(ctx.id);
  await until("the context to be busy", async () => (await other.refresh()).state === "busy", 30_000);
  const stopped = await other.interrupt();
  assert.equal(stopped.status, "interrupted");
  const e = await running;
  assert.deepEqual([e.status, e.id], ["interrupted", stopped.id]);
  assert.equal((await ctx.execute("x")).text, "41");
});

test("contexts: executions() lists the cells newest first", { skip }, async () => {
  const list = await ctx.executions();
  assert.ok(list.length >= 6, `${list.length} executions`);
  assert.equal(list[0].text, "41");
  assert.equal(list.at(-1).executionCount, 1);
});

test("contexts: delete() ends it; get() is then a 404", { skip }, async () => {
  await ctx.delete();
  await assert.rejects(client.contexts(ws.id).get(ctx.id), (err) => err instanceof StationError && err.status === 404);
  assert.deepEqual(await client.contexts(ws.id).list(), []);
});
