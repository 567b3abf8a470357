// Type-level checks (`npm run typecheck`, no output): the seed's example compiles as written,
// and the result types narrow as documented.
import type { Readable } from "node:stream";
import type { ExposedPort, FileEntry, FileEvent, ListeningPort, PortList, Secret, SetSecretRequest } from "station-sandbox";
import { ContainerSandboxAdapter } from "station-sandbox/container";
import { HostSandboxAdapter, type EgressRule, type SandboxAttempt, type SandboxRun, type StationError } from "station-sandbox/host";

export async function seed(): Promise<void> {
  const sandboxes = new ContainerSandboxAdapter({
    rootDir: "/data/sandbox-metadata",
    image: "registry.example/tools@sha256:YOUR_VERIFIED_DIGEST",
    seccompProfile: "/etc/station/seccomp.json",
    network: "none",
    cpus: 1,
    memoryMb: 1024,
    pidsLimit: 128,
  });
  await sandboxes.ready();
  const workspace = await sandboxes.create();
  const run = await sandboxes.exec(workspace.id, {
    command: "node --version && pwd",
    timeoutMs: 10_000,
  });
  // exec returns a run handle. Read command() until status is terminal.
  const current = await sandboxes.command(workspace.id, run.id);
  console.log(current.status, current.stdout);

  const service = await sandboxes.startService(workspace.id, {
    name: "agent-gateway",
    command: "node server.js", // Foreground: do not append & or daemonize.
    restart: { policy: "on-failure", maxRestarts: 5, delayMs: 1000 },
  });
  // Inspect attempts and output through service()/the Services page.
  // Stop deliberately with stopService(workspace.id, service.id).
  await sandboxes.stopService(workspace.id, service.id);
}

// The seed's networkRestricted, enforced: the policy is typed, and the network is readable and
// replaceable at run time.
export async function restricted(): Promise<number> {
  const sandboxes = new ContainerSandboxAdapter({
    image: "registry.example/tools@sha256:YOUR_VERIFIED_DIGEST",
    networkRestricted: true,
    egress: { allow: [{ domain: "github.com" }, { domain: "*.npmjs.org", ports: [443] }, { cidr: "203.0.113.0/24", proto: "tcp" }] },
  });
  const workspace = await sandboxes.create();
  await sandboxes.setNetwork(workspace.id, { allow: [{ domain: "registry.npmjs.org" }] });
  const network = await sandboxes.getNetwork(workspace.id);
  return network.counters ? network.counters.denied : 0;
}

// @ts-expect-error: a rule is a cidr or a domain, not both
export const both: EgressRule = { cidr: "203.0.113.0/24", domain: "github.com" };
// @ts-expect-error: proto is tcp or udp
export const icmp: EgressRule = { domain: "github.com", proto: "icmp" };

export function narrowing(r: SandboxRun): string {
  if (r.encoding === "utf-8") return r.stdout.toUpperCase(); // string
  return r.stdout.toString("hex"); // Buffer
}

// An attempt is ended (its result) or running (its byte counts so far): narrow on state.
export function attemptLine(a: SandboxAttempt): string {
  if (a.state === "running") return `#${a.number} running, ${a.stdoutBytes ?? "?"} bytes so far`;
  // @ts-expect-error: a running attempt has no end reason
  void ((x: SandboxAttempt) => x.state === "running" && x.endReason);
  return `#${a.number} ${a.endReason ?? "?"} exit ${a.exitCode ?? "-"}, ${a.stdoutBytes} bytes`;
}

export function errors(e: StationError): [number, string, string | undefined] {
  return [e.status, e.code, e.field];
}

// Without an image: the worker's default image.
new ContainerSandboxAdapter({ rootDir: "/x" });
// @ts-expect-error: an image is a string
new ContainerSandboxAdapter({ rootDir: "/x", image: 1 });
// @ts-expect-error: the host adapter has no image
new HostSandboxAdapter({ image: "busybox@sha256:0" });

// Files and secrets: the shapes a caller writes against.
export async function filesAndSecrets(sandboxes: HostSandboxAdapter, id: string): Promise<string[]> {
  const e: FileEntry = await sandboxes.files.write(id, "a.txt", "x", { mode: "0600", parents: true });
  const text: string = await sandboxes.files.readText(id, e.path);
  const bytes: Buffer = await sandboxes.files.read(id, "a.txt", { range: { suffix: 1 } });
  const stream: Readable = await sandboxes.files.download(id, "a.txt");
  await sandboxes.files.upload(id, "b.bin", stream, { size: bytes.length });
  const names = (await sandboxes.files.list(id)).entries.map((x: FileEntry) => `${x.name}:${x.type}`);
  for await (const ev of sandboxes.files.watch(id, ".", { recursive: true })) {
    const event: FileEvent = ev;
    names.push(event.type, event.path ?? "", text);
    break;
  }
  const s: Secret = await sandboxes.secrets.set(id, "gh", { value: "v", host: "github.com" });
  // @ts-expect-error: a secret's value never comes back
  names.push(s.value);
  return names;
}

// @ts-expect-error: a secret needs its value
export const noValue: SetSecretRequest = { host: "github.com" };

// Previews: expose's answer has the token and openUrl, a list's exposures never do.
export async function previews(sandboxes: ContainerSandboxAdapter, id: string): Promise<string[]> {
  const e: ExposedPort = await sandboxes.ports.expose(id, 3000, { expiresInMs: 3_600_000 });
  const pub: ExposedPort = await sandboxes.ports.expose(id, 3001, { public: true });
  const list: PortList = await sandboxes.ports.list(id);
  const l: ListeningPort | undefined = list.listening[0];
  const out = [e.url, e.openUrl ?? "", e.token ?? "", pub.access, String(l?.pid ?? "-")];
  // @ts-expect-error: a listed exposure carries no token
  out.push(list.exposed[0]!.token);
  const none: void = await sandboxes.ports.revoke(id, 3000);
  void none;
  return out;
}

// Names and labels: a workspace's name is a string or null, labels a record; a label patch may
// remove a key with null, a create may not; a filter's labels are a record or strings.
export async function names(c: import("station-sandbox").StationClient): Promise<void> {
  const w = await c.createWorkspace({ adapter: "host", name: "web", labels: { team: "x" } });
  const n: string | null = w.name;
  const l: Record<string, string> = w.labels;
  await c.updateWorkspace("web", { name: null, labels: { team: null, tier: "front" } });
  await c.workspaces({ labels: ["team=x", "tier"], name: "web", state: "ready" });
  await c.workspaces({ labels: { team: "x", tier: true } });
  // @ts-expect-error: a create's label is a string, not null
  await c.createWorkspace({ labels: { team: null } });
  void n, l;
}
