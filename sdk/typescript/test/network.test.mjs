// The network options and methods, against a loopback stand-in for the controller that records
// each request: what the SDK sends for networkRestricted/egress/network, and the network calls.
// (What a real worker does with them is the network suite's.)
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, before, test } from "node:test";

import { ContainerSandboxAdapter, HostSandboxAdapter, StationClient } from "station-sandbox";

const IMAGE = "busybox@sha256:" + "a".repeat(64);
const NETWORK = {
  mode: "restricted",
  address: "10.200.0.2",
  gateway: "10.200.0.1",
  egress: { allow: [{ domain: "github.com" }] },
  counters: { allowed: 3, denied: 1, dnsAllowed: 4, dnsRefused: 2 },
};

let server;
let url;
let requests = [];
let checks = [];

before(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      requests.push({ method: req.method, path: req.url, body: body ? JSON.parse(body) : undefined });
      let status = 200;
      let doc = NETWORK;
      if (req.url === "/v1/ready") doc = { ready: checks.every((c) => c.ok), checks };
      else if (req.url.startsWith("/v1/images/")) doc = { digest: req.url.slice(11) };
      else if (req.method === "POST") [status, doc] = [201, { id: "w1-new", state: "ready" }];
      const text = JSON.stringify(doc);
      res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) });
      res.end(text);
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${server.address().port}`;
});

after(() => server.close());

function adapter(options) {
  return new ContainerSandboxAdapter({ client: new StationClient({ url, token: "t" }), image: IMAGE, ...options });
}

async function createBody(options) {
  requests = [];
  await adapter(options).create();
  assert.equal(requests.length, 1);
  assert.equal(requests[0].method, "POST");
  assert.equal(requests[0].path, "/v1/workspaces");
  return requests[0].body;
}

test("network: the seed's networkRestricted with an egress policy creates a restricted workspace", async () => {
  const egress = { allow: [{ domain: "github.com" }, { domain: "*.npmjs.org", ports: [443] }] };
  assert.deepEqual(await createBody({ networkRestricted: true, egress }), {
    adapter: "container",
    image: IMAGE,
    network: "restricted",
    egress,
  });
  // networkRestricted alone: restricted, nothing allowed (no egress sent: the worker denies all)
  assert.deepEqual(await createBody({ networkRestricted: true }), { adapter: "container", image: IMAGE, network: "restricted" });
  // egress alone implies restricted; network: "restricted" with it is the same request
  assert.equal((await createBody({ egress })).network, "restricted");
  assert.equal((await createBody({ network: "restricted", egress })).network, "restricted");
});

test("network: the modes are sent as given, none by default", async () => {
  assert.equal((await createBody({ network: "bridge" })).network, "bridge");
  assert.equal((await createBody({ network: "none" })).network, "none");
  const body = await createBody({});
  assert.equal(body.network, undefined);
  assert.equal(body.egress, undefined);
  assert.equal(adapter({ networkRestricted: true }).network, "restricted");
});

test("network: contradicting options are a TypeError before any request", () => {
  requests = [];
  const egress = { allow: [] };
  assert.throws(() => adapter({ networkRestricted: true, network: "bridge" }), TypeError);
  assert.throws(() => adapter({ networkRestricted: false, network: "restricted" }), TypeError);
  assert.throws(() => adapter({ network: "bridge", egress }), /egress needs network "restricted"/);
  assert.throws(() => adapter({ network: "none", egress }), TypeError);
  assert.throws(() => adapter({ networkRestricted: false, egress }), TypeError);
  assert.throws(() => adapter({ network: "host" }), /network must be/);
  assert.equal(requests.length, 0);
  // positive control: the same options without the contradiction
  assert.equal(adapter({ networkRestricted: true, network: "restricted", egress }).network, "restricted");
});

test("network: getNetwork() and setNetwork() read and replace the policy", async () => {
  const sandboxes = adapter({ networkRestricted: true });
  requests = [];
  const n = await sandboxes.getNetwork("w1-x");
  assert.deepEqual(n, NETWORK);
  assert.deepEqual(requests, [{ method: "GET", path: "/v1/workspaces/w1-x/network", body: undefined }]);

  requests = [];
  const egress = { allow: [{ cidr: "203.0.113.0/24", ports: [443], proto: "tcp" }] };
  assert.equal((await sandboxes.setNetwork("w1-x", egress)).counters.dnsRefused, 2);
  assert.deepEqual(requests, [{ method: "PUT", path: "/v1/workspaces/w1-x/network", body: { egress } }]);
});

test("network: the worker's network checks matter only to bridge and restricted adapters", async () => {
  checks = [
    { name: "runtime", ok: true, message: "crun" },
    { name: "nftables", ok: false, message: "no nf_tables in this kernel" },
  ];
  await adapter({ network: "none" }).ready();
  await adapter({}).ready();
  await new HostSandboxAdapter({ client: new StationClient({ url, token: "t" }) }).ready();
  await assert.rejects(adapter({ network: "bridge" }).ready(), { status: 503, message: /nftables: no nf_tables/ });
  await assert.rejects(adapter({ networkRestricted: true }).ready(), { status: 503 });
  checks = [];
});

test("container: without an image the create names none (the worker's default), and its image check matters", async () => {
  const body = await createBody({ image: undefined });
  assert.equal(body.adapter, "container");
  assert.equal("image" in body, false, JSON.stringify(body));
  assert.equal((await createBody({})).image, IMAGE, "a given image is sent (positive control)");
  checks = [{ name: "image", ok: false, message: "image busybox@sha256:… not in store" }];
  await assert.rejects(adapter({ image: undefined }).ready(), { status: 503, message: /image: image busybox@sha256:… not in store/ });
  requests = [];
  await adapter({}).ready(); // names its own image: the worker's default does not matter
  assert.deepEqual(requests.map((r) => r.path), ["/v1/ready", `/v1/images/${IMAGE.slice(8)}`]);
  checks = [];
});
