// The worker list and the choices made from it, without controllers: the id's worker, the
// placement rule, the refusals of a bad STATION_WORKERS or workers file.
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { StationClient, mostFree, parseWorkersEnv, placeWorker, readWorkersFile, workerOfId } from "station-sandbox";

test("workers config: an id's worker is everything before its last dash", () => {
  assert.equal(workerOfId("w2-abcdefghijklmnopqrstuvwxyz"), "w2");
  assert.equal(workerOfId("eu-1-abcdefghijklmnopqrstuvwxyz"), "eu-1");
});

const st = (name, free, avail, up = true, tenant = null, caller = { scope: "tenant", tenant: "a" }) => ({
  name, url: `http://${name}`, up, error: up ? undefined : "refused", tenant, caller,
  capacity: { workspaces: { max: 9, used: 0, free }, memoryBytes: { total: 0, available: avail } },
});

test("workers config: placement: free slots, then available memory, then list order", () => {
  assert.equal(mostFree([st("a", 1, 9), st("b", 2, 1), st("c", 2, 1)]).name, "b");
  assert.equal(mostFree([st("a", 2, 1), st("b", 2, 5), st("c", 1, 99)]).name, "b");
  assert.equal(mostFree([st("a", 9, 9, false), st("b", 1, 0)]).name, "b");
  assert.equal(mostFree([st("a", 9, 9, false), st("b", 0, 9)]), undefined);
});

test("workers config: placement skips another tenant's private worker and prefers the caller's own", () => {
  const ws = [st("w1", 1, 1), st("w2", 50, 50, true, "b")];
  assert.equal(placeWorker(ws).worker.name, "w1");
  for (const w of ws) w.caller = { scope: "tenant", tenant: "b" };
  assert.equal(placeWorker(ws).worker.name, "w2");
  ws[1].capacity.workspaces.free = 0; // its own is full: a shared one then
  assert.equal(placeWorker(ws).worker.name, "w1");
  const admin = { scope: "admin", tenant: null };
  assert.equal(placeWorker([st("w1", 1, 1, true, null, admin), st("w2", 50, 50, true, "b", admin)]).worker.name, "w2");
});

test("workers config: placement says why each worker was skipped", () => {
  const got = placeWorker([st("w1", 9, 9, false), st("w2", 9, 9, true, "b"), st("w3", 0, 9)]);
  assert.equal(got.worker, undefined);
  assert.equal(got.why, "worker w1 (http://w1) did not answer: refused; worker w2 is private to another tenant; worker w3 is full");
});

test("workers config: STATION_WORKERS and the option", () => {
  assert.deepEqual(parseWorkersEnv(" w1=http://h1:8080 , w2=unix:/run/s.sock,"), [
    { name: "w1", url: "http://h1:8080" },
    { name: "w2", url: "unix:/run/s.sock" },
  ]);
  assert.throws(() => parseWorkersEnv(""), { message: "STATION_WORKERS: no workers" });
  assert.throws(() => parseWorkersEnv("w2=unix:relative"), { message: /unix:relative is not unix:\/absolute\/path/ });
  assert.throws(() => parseWorkersEnv("a".repeat(33) + "=http://h"), { message: /is not 1-32 of/ });
  assert.throws(() => new StationClient({ workers: {}, url: "http://h" }), { message: "give either workers or socketPath/url/rootDir, not both" });
  assert.throws(() => new StationClient({ workers: [{ name: "w1", url: "http://h", token: "a\nb" }] }), { message: /without line breaks/ });
});

test("workers config: a workers file", () => {
  const dir = mkdtempSync(join(tmpdir(), "workers-config-"));
  const f = join(dir, "workers");
  writeFileSync(f, "w1 http://h1:8080\n  # nothing\nw2\n");
  assert.throws(() => readWorkersFile(f), { message: `workers file ${f}, line 3: want NAME URL [TOKEN-FILE]` });
  writeFileSync(f, "w1 http://h1:8080 missing.token\n");
  assert.throws(() => readWorkersFile(f), { message: new RegExp(`line 1: token file ${join(dir, "missing.token")}: ENOENT`) });
  writeFileSync(join(dir, "t"), "two words\n");
  chmodSync(join(dir, "t"), 0o600);
  writeFileSync(f, "w1 http://h1:8080 t\n");
  assert.throws(() => readWorkersFile(f), { message: /not one token of printable ASCII without spaces/ });
  writeFileSync(join(dir, "t"), "s3cret\n");
  assert.deepEqual(readWorkersFile(f), [{ name: "w1", url: "http://h1:8080", token: "s3cret" }]);
  writeFileSync(f, "#".repeat(256 * 1024 + 1));
  assert.throws(() => readWorkersFile(f), { message: /larger than 262144 bytes/ });
});
