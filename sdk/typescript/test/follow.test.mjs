// followOutput and serviceLogs over WebSocket against a hostile server of the test's own (a unix
// socket that answers the upgrade and then sends what each case says): gaps and output exactly
// as sent, unknown messages skipped, the run fetched once the stream ended (positive control);
// a message over the cap, a masked frame, an unknown opcode, a short binary message, an error
// message, a close before the end (after the bounded reconnects): each rejects with a clear
// error, none hangs; a dropped connection resumes from the offsets delivered.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { StationClient } from "station-sandbox";

const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
const RUN = { id: "r-1", status: "exited", exitCode: 0, stdout: "abcde", stdoutBytes: 15, encoding: "utf-8" };
const SERVICE = { id: "web", name: "web", state: "running", attempts: [{ number: 1, stdout: "up\n", encoding: "utf-8" }] };

function frame(opcode, payload, fin = true) {
  const p = Buffer.from(payload);
  const n = p.length;
  const h = n < 126 ? Buffer.alloc(2) : n < 65536 ? Buffer.alloc(4) : Buffer.alloc(10);
  h[0] = (fin ? 0x80 : 0) | opcode;
  if (n < 126) h[1] = n;
  else if (n < 65536) {
    h[1] = 126;
    h.writeUInt16BE(n, 2);
  } else {
    h[1] = 127;
    h.writeBigUInt64BE(BigInt(n), 2);
  }
  return Buffer.concat([h, p]);
}
const text = (o) => frame(0x1, JSON.stringify(o));
function output(stream, offset, s) {
  const p = Buffer.alloc(9);
  p[0] = stream;
  p.writeBigUInt64BE(BigInt(offset), 1);
  return frame(0x2, Buffer.concat([p, Buffer.from(s)]));
}
function close(code, reason = "") {
  const p = Buffer.alloc(2);
  p.writeUInt16BE(code, 0);
  return frame(0x8, Buffer.concat([p, Buffer.from(reason)]));
}

const SCENARIOS = {
  "gap-end": [
    output(1, 0, "abc"),
    text({ type: "gap", stream: "stdout", offset: 3, bytes: 10 }),
    frame(0x9, "p"),
    output(1, 13, "de"),
    output(2, 0, "E"),
    text({ type: "from-the-future" }),
    text({ type: "end", run: { id: "r-1", status: "exited", exitCode: 0, stdoutBytes: 15 } }),
    close(1000, "run finished"),
  ],
  "service-end": [output(1, 0, "up\n"), text({ type: "end", service: { id: "web", name: "web", state: "running", attempts: [{ number: 1 }] } }), close(1000)],
  oversize: [Buffer.concat([Buffer.from([0x82, 127]), Buffer.from([0, 0, 0, 0, 0x10, 0, 0, 0])])],
  masked: [Buffer.from([0x82, 0x81, 1, 2, 3, 4, 0x78])],
  "bad-opcode": [output(1, 0, "abc"), Buffer.from([0x83, 0x01, 0x78])],
  "short-binary": [frame(0x2, Buffer.from([1, 0, 0]))],
  error: [text({ type: "error", error: { code: "not_found", message: "run r-1 is gone" } }), close(1011, "run unavailable")],
  "close-mid": [output(1, 0, "hello"), close(1001, "shutting down")],
  "eof-mid": [output(1, 0, "hello")],
  // A connection dropped mid-stream, then one that resumes (the server answers from the
  // offsets asked: the 3 bytes after "hello" are no longer kept) and ends.
  resume: [
    [output(1, 0, "hello"), output(2, 0, "E")],
    [output(1, 3, "lo"), text({ type: "gap", stream: "stdout", offset: 5, bytes: 3 }), output(1, 8, "xy"), output(2, 0, "E"), text({ type: "end", run: { id: "r-1", status: "exited", exitCode: 0, stdoutBytes: 10 } }), close(1000)],
  ],
};

let dir, server, scenario;
let paths = [];

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "sdk-follow-"));
  server = createServer((sock) => {
    let head = "";
    sock.on("error", () => {});
    sock.on("data", function onData(c) {
      head += c.toString("latin1");
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) return;
      sock.off("data", onData);
      sock.on("data", () => {}); // the client's close frame
      const key = /sec-websocket-key:\s*(\S+)/i.exec(head)?.[1];
      if (!key) {
        // A plain GET: the run or the service, as GET answers it.
        const body = JSON.stringify(head.includes("/services/") ? SERVICE : RUN);
        sock.end(`HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
        return;
      }
      const accept = createHash("sha1").update(key + GUID).digest("base64");
      sock.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
      paths.push(/^GET (\S+)/.exec(head)?.[1]);
      let frames = SCENARIOS[scenario];
      if (Array.isArray(frames[0])) frames = frames[Math.min(paths.length, frames.length) - 1];
      for (const b of frames) sock.write(b);
      sock.end();
    });
  });
  await new Promise((r) => server.listen(join(dir, "sock"), r));
});

after(() => {
  server.close();
  rmSync(dir, { recursive: true, force: true });
});

function follow(name) {
  scenario = name;
  paths = [];
  const client = new StationClient({ socketPath: join(dir, "sock") });
  const seen = { out: [], gaps: [] };
  const p = client.followOutput("w-1", "r-1", {
    onOutput: (c) => seen.out.push([c.stream, c.offset, c.data.toString()]),
    onGap: (g) => seen.gaps.push(g),
  });
  return { p, seen };
}

test("follow: output and gaps as sent, the run fetched at the end (positive control)", async () => {
  const { p, seen } = follow("gap-end");
  const run = await p;
  assert.deepEqual(seen.out, [["stdout", 0, "abc"], ["stdout", 13, "de"], ["stderr", 0, "E"]]);
  assert.deepEqual(seen.gaps, [{ stream: "stdout", offset: 3, bytes: 10 }]);
  assert.deepEqual(run, RUN, "the run as GET returns it, output fields included");
});

test("follow: a service's logs end with the service as GET returns it", async () => {
  scenario = "service-end";
  const client = new StationClient({ socketPath: join(dir, "sock") });
  const chunks = [];
  const service = await client.serviceLogs("w-1", "web", { follow: true, onOutput: (c) => chunks.push(c.data.toString()) });
  assert.deepEqual(chunks, ["up\n"]);
  assert.deepEqual(service, SERVICE, "attempts with their output");
});

for (const [name, message] of [
  ["oversize", /message too big/],
  ["masked", /server frames must not be masked/],
  ["bad-opcode", /unknown opcode/],
  ["short-binary", /9-byte prefix/],
  ["close-mid", /ended without an end event \(close 1001 shutting down\)/],
  ["eof-mid", /ended without an end event/],
]) {
  test(`follow: ${name} rejects with a clear error`, async () => {
    const { p } = follow(name);
    await assert.rejects(p, (e) => {
      assert.equal(e.name, "StationError");
      assert.equal(e.code, "protocol_error");
      assert.match(e.message, message);
      return true;
    });
  });
}

test("follow: a dropped connection resumes from the offsets delivered, each byte once", async () => {
  const { p, seen } = follow("resume");
  const run = await p;
  assert.deepEqual(seen.out, [["stdout", 0, "hello"], ["stderr", 0, "E"], ["stdout", 8, "xy"]]);
  assert.deepEqual(seen.gaps, [{ stream: "stdout", offset: 5, bytes: 3 }]);
  assert.deepEqual(paths, ["/v1/workspaces/w-1/commands/r-1/output", "/v1/workspaces/w-1/commands/r-1/output?stdoutOffset=5&stderrOffset=1"]);
  assert.deepEqual(run, RUN);
});

test("follow: bounded reconnects without progress, then the error", async () => {
  const { p } = follow("eof-mid");
  await assert.rejects(p, /ended without an end event/);
  assert.equal(paths.length, 4, "once, then 3 times again");
  assert.equal(paths[3], "/v1/workspaces/w-1/commands/r-1/output?stdoutOffset=5&stderrOffset=0");
});

test("follow: an error message rejects with the API error", async () => {
  const { p } = follow("error");
  await assert.rejects(p, { status: 404, code: "not_found", message: /run r-1 is gone/ });
});
