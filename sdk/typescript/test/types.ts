// Type-level checks (`npm run typecheck`, no output): the seed's example compiles as written,
// and the result types narrow as documented.
import { ContainerSandboxAdapter } from "station-sandbox/container";
import { HostSandboxAdapter, type SandboxRun, type StationError } from "station-sandbox/host";

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

export function narrowing(r: SandboxRun): string {
  if (r.encoding === "utf-8") return r.stdout.toUpperCase(); // string
  return r.stdout.toString("hex"); // Buffer
}

export function errors(e: StationError): [number, string, string | undefined] {
  return [e.status, e.code, e.field];
}

// @ts-expect-error: the container adapter needs an image
new ContainerSandboxAdapter({ rootDir: "/x" });
// @ts-expect-error: the host adapter has no image
new HostSandboxAdapter({ image: "busybox@sha256:0" });
