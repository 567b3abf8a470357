// Files and secrets through the SDK against a real controller (host adapter): the adapters'
// `files` and `secrets`, streams both ways, watch as an async iterator, errors naming the path.
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { Readable } from "node:stream";
import { after, before, test } from "node:test";

import { HostSandboxAdapter, StationError } from "station-sandbox/host";
import { ROOT, TOKEN, URL } from "./env.mjs";

const sandboxes = new HostSandboxAdapter({ rootDir: ROOT });
let ws; // one workspace for these tests
let D; // its directory, absolute: every path below is beneath it

before(async () => {
  ws = await sandboxes.create();
  D = ws.workdir;
});

after(async () => {
  if (ws) await sandboxes.delete(ws.id).catch(() => {});
});

test("files: write, read, readText, stat, list", async () => {
  const e = await sandboxes.files.write(ws.id, `${D}/a.txt`, "héllo\n", { mode: "0600" });
  assert.deepEqual(
    { name: e.name, path: e.path, type: e.type, size: e.size, mode: e.mode, linkTarget: e.linkTarget },
    { name: "a.txt", path: `${D}/a.txt`, type: "file", size: 7, mode: "0600", linkTarget: null },
  );
  assert.match(e.etag, /^".+"$/);
  assert.match(e.mtime, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  assert.equal(await sandboxes.files.readText(ws.id, `${D}/a.txt`), "héllo\n");
  assert.deepEqual(await sandboxes.files.read(ws.id, "a.txt"), Buffer.from("héllo\n"), "relative to the workspace directory");
  const bytes = Buffer.from([0, 1, 2, 255, 254, 10, 0]);
  await sandboxes.files.write(ws.id, `${D}/bin`, bytes);
  assert.deepEqual(await sandboxes.files.read(ws.id, `${D}/bin`), bytes, "binary-safe");
  await assert.rejects(sandboxes.files.readText(ws.id, `${D}/bin`), TypeError, "not UTF-8: readText throws");
  assert.deepEqual(await sandboxes.files.read(ws.id, `${D}/bin`, { range: { start: 3, end: 4 } }), Buffer.from([255, 254]));
  assert.deepEqual(await sandboxes.files.read(ws.id, `${D}/bin`, { range: { suffix: 2 } }), Buffer.from([10, 0]));

  const s = await sandboxes.files.stat(ws.id, `${D}/a.txt`);
  assert.equal(s.etag, e.etag);
  await sandboxes.exec(ws.id, { command: `ln -s /etc/shadow ${D}/link` }).then((r) => sandboxes.wait(ws.id, r.id));
  const link = await sandboxes.files.stat(ws.id, `${D}/link`);
  assert.deepEqual([link.type, link.linkTarget], ["symlink", "/etc/shadow"], "a final symlink is not followed");
  const l = await sandboxes.files.list(ws.id, D);
  assert.equal(l.path, D);
  assert.equal(l.truncated, false);
  assert.deepEqual(
    l.entries.map((x) => `${x.name}:${x.type}`),
    ["a.txt:file", "bin:file", "link:symlink"],
  );
  assert.deepEqual((await sandboxes.files.list(ws.id)).entries.map((x) => x.name), ["a.txt", "bin", "link"], "default: the workspace directory");
});

test("files: errors are StationErrors naming the path", async () => {
  await assert.rejects(sandboxes.files.read(ws.id, `${D}/nope`), (e) => {
    assert.ok(e instanceof StationError);
    assert.deepEqual([e.status, e.code, e.field], [404, "not_found", "path"]);
    assert.match(e.message, /nope/);
    return true;
  });
  await assert.rejects(sandboxes.files.download(ws.id, `${D}/nope`), { status: 404, code: "not_found" });
  await assert.rejects(sandboxes.files.read(ws.id, "/etc/passwd"), { status: 400, code: "invalid_argument", message: /escapes the workspace/ });
  await assert.rejects(sandboxes.files.read(ws.id, `${D}/link`), { status: 400, message: /escapes the workspace/ });
  await assert.rejects(sandboxes.files.read(ws.id, `${D}/a.txt`, { maxBytes: 3 }), { status: 413, code: "payload_too_large" });
  await assert.rejects(sandboxes.files.read(ws.id, `${D}/bin`, { range: { start: 100 } }), { status: 416, code: "range_not_satisfiable" });
  await assert.rejects(sandboxes.files.write(ws.id, `${D}/a.txt`, "x", { exclusive: true }), { status: 409, code: "conflict", message: /exists/ });
  await assert.rejects(sandboxes.files.write(ws.id, `${D}/no/dir/f`, "x"), { status: 404 });
  await assert.rejects(sandboxes.files.list(ws.id, `${D}/a.txt`), { status: 400, message: /not a directory/ });
  await assert.rejects(sandboxes.files.write(ws.id, "x", "y", { mode: "rwx" }), TypeError);
});

test("files: ifMatch writes only over the version read (412 after a change)", async () => {
  const { etag } = await sandboxes.files.stat(ws.id, `${D}/a.txt`);
  const e = await sandboxes.files.write(ws.id, `${D}/a.txt`, "v2", { ifMatch: etag });
  assert.notEqual(e.etag, etag);
  await assert.rejects(sandboxes.files.write(ws.id, `${D}/a.txt`, "v3", { ifMatch: etag }), { status: 412, code: "precondition_failed" });
  assert.equal(await sandboxes.files.readText(ws.id, `${D}/a.txt`), "v2");
});

function sha256(buf) {
  return createHash("sha256").update(buf).digest("hex");
}

test("files: upload and download streamed (32 MiB), byte-identical", async () => {
  const size = 32 * 1024 * 1024 + 13;
  const data = randomBytes(size);
  // chunked: a generator of 1 MiB pieces
  async function* pieces() {
    for (let i = 0; i < size; i += 1 << 20) yield data.subarray(i, Math.min(size, i + (1 << 20)));
  }
  const e = await sandboxes.files.upload(ws.id, `${D}/big/data.bin`, pieces(), { parents: true });
  assert.equal(e.size, size);
  // with a Content-Length: a node Readable
  const e2 = await sandboxes.files.upload(ws.id, `${D}/big/data2.bin`, Readable.from(pieces()), { size });
  assert.equal(e2.size, size);
  for (const p of [`${D}/big/data.bin`, `${D}/big/data2.bin`]) {
    const stream = await sandboxes.files.download(ws.id, p);
    const hash = createHash("sha256");
    let n = 0;
    for await (const chunk of stream) {
      hash.update(chunk);
      n += chunk.length;
    }
    assert.equal(n, size);
    assert.equal(hash.digest("hex"), sha256(data), `${p} is byte-identical`);
  }
  const part = await sandboxes.files.download(ws.id, `${D}/big/data.bin`, { range: { start: 1000, end: 1999 } });
  const got = [];
  for await (const c of part) got.push(c);
  assert.deepEqual(Buffer.concat(got), data.subarray(1000, 2000), "a downloaded range");
});

test("files: a failing upload source changes nothing", async () => {
  await sandboxes.files.write(ws.id, `${D}/keep.txt`, "original");
  async function* broken() {
    yield Buffer.from("partial ");
    throw new Error("the source broke");
  }
  await assert.rejects(sandboxes.files.upload(ws.id, `${D}/keep.txt`, broken()), { name: "StationError", message: /the source broke/ });
  assert.equal(await sandboxes.files.readText(ws.id, `${D}/keep.txt`), "original");
});

test("files: mkdir, rename, remove", async () => {
  const d = await sandboxes.files.mkdir(ws.id, `${D}/m/n`, { parents: true, mode: 0o700 });
  assert.deepEqual([d.type, d.mode, d.path], ["dir", "0700", `${D}/m/n`]);
  await assert.rejects(sandboxes.files.mkdir(ws.id, `${D}/m`), { status: 409 });
  await sandboxes.files.write(ws.id, `${D}/m/x`, "x");
  await sandboxes.files.write(ws.id, `${D}/m/y`, "y");
  await assert.rejects(sandboxes.files.rename(ws.id, `${D}/m/x`, `${D}/m/y`, { overwrite: false }), { status: 409, field: "to" });
  const r = await sandboxes.files.rename(ws.id, `${D}/m/x`, `${D}/m/y`);
  assert.equal(r.path, `${D}/m/y`);
  assert.equal(await sandboxes.files.readText(ws.id, `${D}/m/y`), "x");
  await assert.rejects(sandboxes.files.remove(ws.id, `${D}/m`), { status: 409, message: /not empty/ });
  assert.deepEqual(await sandboxes.files.remove(ws.id, `${D}/m`, { recursive: true }), { path: `${D}/m`, deleted: true });
  await assert.rejects(sandboxes.files.stat(ws.id, `${D}/m`), { status: 404 });
});

test("files: watch is an async iterator (ready, created, moved, deleted; ends with the directory)", async () => {
  await sandboxes.files.mkdir(ws.id, `${D}/w`);
  const seen = [];
  for await (const e of sandboxes.files.watch(ws.id, `${D}/w`, { recursive: true })) {
    seen.push(e.type === "ready" ? "ready" : `${e.type} ${e.kind} ${e.path}${e.to ? ` -> ${e.to}` : ""}`);
    if (e.type === "ready") {
      await sandboxes.files.mkdir(ws.id, `${D}/w/sub`);
      await sandboxes.files.rename(ws.id, `${D}/w/sub`, `${D}/w/sub2`);
      await sandboxes.files.remove(ws.id, `${D}/w`, { recursive: true }); // ends the stream
    }
    assert.ok(seen.length < 20, `runaway events: ${seen.join("; ")}`);
  }
  assert.deepEqual(seen.slice(0, 3), ["ready", `created dir ${D}/w/sub`, `moved dir ${D}/w/sub -> ${D}/w/sub2`]);
  assert.equal(seen.at(-1), `deleted dir ${D}/w`);
});

test("files: a watch stops with break, and with its signal", async () => {
  await sandboxes.files.mkdir(ws.id, `${D}/w2`);
  for await (const e of sandboxes.files.watch(ws.id, `${D}/w2`)) {
    assert.equal(e.type, "ready");
    break;
  }
  const ac = new AbortController();
  const events = [];
  for await (const e of sandboxes.files.watch(ws.id, `${D}/w2`, { signal: ac.signal })) {
    events.push(e.type);
    if (e.type === "ready") await sandboxes.files.write(ws.id, `${D}/w2/f`, "x");
    else ac.abort();
  }
  assert.equal(events[0], "ready");
  assert.ok(events.length >= 2, `events: ${events}`);
  await assert.rejects(async () => {
    for await (const e of sandboxes.files.watch(ws.id, `${D}/no-such-dir`)) void e;
  }, { status: 404, code: "not_found" });
});

test("secrets: set, list, get, delete; the value never comes back", async () => {
  const value = "ghs_sdk_s3cr3t_value";
  const s = await sandboxes.secrets.set(ws.id, "gh", { value, host: "github.com" });
  assert.deepEqual([s.name, s.host, s.username, s.expiresAt], ["gh", "github.com", "x-access-token", null]);
  const s2 = await sandboxes.secrets.set(ws.id, "reg", { value: "pw", username: "bob", expiresAt: "2099-01-01T00:00:00Z" });
  assert.deepEqual([s2.username, s2.expiresAt], ["bob", "2099-01-01T00:00:00.000Z"]);
  const list = await sandboxes.secrets.list(ws.id);
  assert.deepEqual(list.map((x) => x.name), ["gh", "reg"]);
  assert.ok(!JSON.stringify(list).includes("s3cr3t"), "no value in the list");
  assert.ok(!JSON.stringify(await sandboxes.secrets.get(ws.id, "gh")).includes("s3cr3t"), "no value in get");
  await assert.rejects(sandboxes.secrets.set(ws.id, "x", { value: "v", expiresAt: "2001-01-01T00:00:00Z" }), {
    status: 400,
    code: "invalid_argument",
    field: "expiresAt",
  });
  await assert.rejects(sandboxes.secrets.set(ws.id, "x", { value: "a\nb" }), { status: 400, field: "value" });
  assert.deepEqual(await sandboxes.secrets.delete(ws.id, "gh"), { name: "gh", deleted: true });
  await assert.rejects(sandboxes.secrets.get(ws.id, "gh"), { status: 404, code: "not_found" });
  await sandboxes.secrets.delete(ws.id, "reg");
  assert.deepEqual(await sandboxes.secrets.list(ws.id), []);
});

test("files over TCP with the bearer token", { skip: URL && TOKEN ? false : "no TCP listener" }, async () => {
  const remote = new HostSandboxAdapter({ url: URL, token: TOKEN });
  await remote.files.write(ws.id, `${D}/tcp.txt`, "over tcp");
  assert.equal(await remote.files.readText(ws.id, `${D}/tcp.txt`), "over tcp");
  const stream = await remote.files.download(ws.id, `${D}/tcp.txt`);
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  assert.equal(Buffer.concat(chunks).toString(), "over tcp");
});
