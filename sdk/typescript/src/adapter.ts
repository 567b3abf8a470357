// The seed's high-level API: an adapter creates workspaces of one kind (host or container) and
// runs commands and services in them. Output is decoded: text as strings, binary as Buffers.

import { StationClient, type ConnectionOptions, type CreateOptions, type CreateWorkspaceOptions, type WorkspaceList } from "./client.js";
import type { WorkerState } from "./workers.js";
import { StationError } from "./errors.js";
import { WorkspaceFiles, WorkspacePorts, WorkspaceSecrets } from "./files.js";
import type {
  AdapterKind,
  EndedAttemptInfo,
  RunningAttemptInfo,
  CreateWorkspaceRequest,
  DeletedService,
  DeletedWorkspace,
  EgressPolicy,
  Snapshot,
  SnapshotRequest,
  OutputGap,
  ReadyReport,
  Run,
  RunInfo,
  Service,
  StartCommandRequest,
  StartServiceRequest,
  WireOutput,
  Workspace,
  WorkspaceNetwork,
} from "./types.js";

/** Output that was valid UTF-8 (without NUL): strings. */
export interface TextOutput {
  encoding: "utf-8";
  stdout: string;
  stderr: string;
  stdoutTail?: string;
  stderrTail?: string;
}

/** Output that was not valid UTF-8: the exact bytes as Buffers. */
export interface BinaryOutput {
  encoding: "base64";
  stdout: Buffer;
  stderr: Buffer;
  stdoutTail?: Buffer;
  stderrTail?: Buffer;
}

/**
 * A run with its output decoded. Narrow on `encoding`: `"utf-8"` gives strings, `"base64"`
 * (the output was binary) gives Buffers holding the exact bytes. `stdoutTail`/`stderrTail`
 * exist only when `truncated` is true and that stream overflowed.
 */
export type SandboxRun = RunInfo & (TextOutput | BinaryOutput);

/**
 * An attempt of a service: an ended one (`state: "ended"`) with its output decoded like a run's
 * when fetched singly, or the running one (`state: "running"`, last) with its byte counts so far.
 */
export type SandboxAttempt =
  | (EndedAttemptInfo & { truncated?: boolean } & (Partial<TextOutput> | Partial<BinaryOutput>))
  | RunningAttemptInfo;

/**
 * A service as the adapter returns it: `id` is the service's name (what the API's paths take,
 * so `stopService(workspace.id, service.id)` works); the controller's own `svc-…` id is
 * `serviceId`.
 */
export type SandboxService = Omit<Service, "id" | "attempts"> & {
  id: string;
  serviceId: string;
  attempts: SandboxAttempt[];
};

export interface ExecOptions {
  /** Runs as `/bin/sh -c COMMAND`. */
  command: string;
  /** Absolute, or relative to the workspace directory. */
  cwd?: string;
  env?: Record<string, string>;
  /** Text, or bytes (sent base64). At most 1 MiB. */
  stdin?: string | Uint8Array;
  /** 1-86400000, default 60000; then the run ends `timed_out`. */
  timeoutMs?: number;
  /** Even, 2-8388608, default 131072: per stream, head and tail of half each are kept. */
  maxOutputBytes?: number;
  /**
   * Sent as the request's `Idempotency-Key`; default a random one for this call. exec retries
   * by itself with the same key after a connection error (see `CreateOptions`); pass your own
   * key to retry it yourself without starting the command twice.
   */
  idempotencyKey?: string;
  /** Retries after a connection error, 0-10; default 2 (`CreateOptions`). */
  retries?: number;
}

export interface FollowOptions {
  onStdout?: (data: Buffer, offset: number) => void;
  onStderr?: (data: Buffer, offset: number) => void;
  onGap?: (gap: OutputGap) => void;
  /** Stops following; the promise then rejects with an AbortError. */
  signal?: AbortSignal;
  /** Where to begin per stream (default 0): the offset after the last byte already had. */
  offset?: { stdout?: number; stderr?: number };
  /** Connections in a row without progress after a drop before the follow rejects (default 3). */
  retries?: number;
}

/** Limits and environment of the workspaces an adapter creates. */
export interface WorkspaceOptions {
  /** Added to every command's environment. */
  env?: Record<string, string>;
  /** CPUs (0-1024, fractions allowed); 0 or absent: unlimited. */
  cpus?: number;
  /** Memory limit in MiB; 0 or absent: the worker's default (`--default-memory-mb`). */
  memoryMb?: number;
  /** Process limit; 0 or absent: the worker's default (`--default-pids-limit`). */
  pidsLimit?: number;
  /**
   * Stop a workspace once nothing runs, nobody is attached and no API call came for this long
   * (1000 ms to 30 days); 0 or absent: never. `restart` starts it again, HOME kept.
   */
  idleTimeoutMs?: number;
}

export interface AdapterOptions extends ConnectionOptions, WorkspaceOptions {
  /** Use this client rather than one made from the connection options. */
  client?: StationClient;
}

const TERMINAL_WAIT_CAP_MS = 60_000;
const CONTAINER_CHECKS = new Set(["runtime", "images", "image", "seccompProfile"]);
/** Checks that never decide ready: `checkpoint` says whether memory snapshots work. */
const INFO_CHECKS = new Set(["checkpoint"]);
/** The worker's network checks: they matter only to bridge and restricted workspaces. */
const NETWORK_CHECKS = new Set([
  "networkRange",
  "bridge",
  "ipForward",
  "nftables",
  "resolver",
  "denialLog",
]);

function decodePart(encoding: string | undefined, s: string): string | Buffer {
  return encoding === "base64" ? Buffer.from(s, "base64") : s;
}

/** Decodes the output fields of a run or an attempt per its `encoding`. */
export function decodeOutput<T extends Partial<WireOutput>>(
  x: T,
): Omit<T, keyof WireOutput> & (TextOutput | BinaryOutput) {
  const out: Record<string, unknown> = { ...x };
  for (const k of ["stdout", "stderr", "stdoutTail", "stderrTail"] as const) {
    const v = x[k];
    if (typeof v === "string") out[k] = decodePart(x.encoding, v);
  }
  return out as never;
}

function defined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

export function isTerminal(run: { status: string }): boolean {
  return run.status !== "running";
}

/** What HostSandboxAdapter and ContainerSandboxAdapter share. */
export abstract class SandboxAdapter {
  /** The low-level client, for endpoints the adapter does not wrap (images, terminals, …). */
  readonly client: StationClient;
  /** A workspace's files: `sandboxes.files.read(workspace.id, "package.json")`. */
  readonly files: WorkspaceFiles;
  /** A workspace's secrets: `sandboxes.secrets.set(workspace.id, "github", {value, host})`. */
  readonly secrets: WorkspaceSecrets;
  /** A workspace's preview URLs: `sandboxes.ports.expose(workspace.id, 3000)`. */
  readonly ports: WorkspacePorts;
  abstract readonly adapter: AdapterKind;
  protected readonly workspaceOptions: WorkspaceOptions;

  protected constructor(options: AdapterOptions) {
    const { client, socketPath, url, rootDir, token, workers, timeoutMs, env, cpus, memoryMb, pidsLimit, idleTimeoutMs } =
      options;
    this.client = client ?? new StationClient(defined({ socketPath, url, rootDir, token, workers, timeoutMs }));
    this.files = new WorkspaceFiles(this.client);
    this.secrets = new WorkspaceSecrets(this.client);
    this.ports = new WorkspacePorts(this.client);
    this.workspaceOptions = defined({ env, cpus, memoryMb, pidsLimit, idleTimeoutMs });
  }

  /** The create body of this adapter's workspaces. */
  protected abstract createRequest(overrides: WorkspaceOptions): CreateWorkspaceRequest;

  /** Whether a check of GET /v1/ready matters to this adapter. */
  protected abstract checkMatters(name: string): boolean;

  /** Extra checks this adapter makes (e.g. that its image is in the store); failures as text. */
  protected async extraChecks(): Promise<string[]> {
    return [];
  }

  /**
   * Resolves to the worker's ready report when this adapter can create workspaces; else throws
   * a StationError (status 503, code `unavailable`) whose message names every failing check.
   */
  async ready(): Promise<ReadyReport> {
    const report = await this.client.ready();
    const failing = report.checks
      .filter((c) => !c.ok && !INFO_CHECKS.has(c.name) && this.checkMatters(c.name))
      .map((c) => `${c.name}: ${c.message}`);
    failing.push(...(await this.extraChecks()));
    if (failing.length) {
      throw new StationError(
        503,
        "unavailable",
        `worker at ${this.client.endpoint} is not ready for ${this.adapter} workspaces: ${failing.join("; ")}`,
      );
    }
    return report;
  }

  // -- workspaces -------------------------------------------------------------------------

  /**
   * Creates a workspace (state `ready`). Keep its id: later calls need it. Retried by itself
   * after a connection error with one Idempotency-Key, so it never makes two (`CreateOptions`).
   */
  create(overrides: WorkspaceOptions = {}, options: CreateWorkspaceOptions = {}): Promise<Workspace> {
    return this.client.createWorkspace(this.createRequest(overrides), options);
  }

  /** Every workspace (with several workers: of all of them, and `unreachable`). */
  workspaces(): Promise<WorkspaceList> {
    return this.client.workspaces();
  }

  /** Each worker's state: up or down, version, capacity, workspace count. */
  workers(): Promise<WorkerState[]> {
    return this.client.workers();
  }

  workspace(workspaceId: string): Promise<Workspace> {
    return this.client.workspace(workspaceId);
  }

  /** Kills every run and service, removes the workspace and its files. */
  delete(workspaceId: string): Promise<DeletedWorkspace> {
    return this.client.deleteWorkspace(workspaceId);
  }

  /** Stops the workspace's agent (its runs end `lost`) and starts a new one; HOME is kept. */
  restart(workspaceId: string): Promise<Workspace> {
    return this.client.restartWorkspace(workspaceId);
  }

  /** Freezes every process of the workspace (see `StationClient.pauseWorkspace`). */
  pause(workspaceId: string): Promise<Workspace> {
    return this.client.pauseWorkspace(workspaceId);
  }

  resume(workspaceId: string): Promise<Workspace> {
    return this.client.resumeWorkspace(workspaceId);
  }

  /** A snapshot of the workspace's HOME and file changes (see `StationClient.createSnapshot`). */
  snapshot(workspaceId: string, request: SnapshotRequest = {}): Promise<Snapshot> {
    return this.client.createSnapshot(workspaceId, request);
  }

  /** `n` (1-100) new workspaces made from one snapshot of this one, each independent. */
  async fork(workspaceId: string, n = 1): Promise<Workspace[]> {
    return (await this.client.forkWorkspace(workspaceId, n)).workspaces;
  }

  /**
   * A workspace started from a snapshot (its files and image; this adapter's limits and env).
   * With several workers, on the worker the snapshot's id names.
   */
  fromSnapshot(snapshotId: string, overrides: WorkspaceOptions = {}, options: CreateWorkspaceOptions = {}): Promise<Workspace> {
    const { image: _image, ...request } = this.createRequest(overrides);
    return this.client.createWorkspace({ ...request, snapshot: snapshotId }, options);
  }

  /**
   * The workspace's network: mode, address, gateway, egress policy and counters. (Not
   * `network()`: the container adapter's `network` is the mode it creates workspaces with.)
   */
  getNetwork(workspaceId: string): Promise<WorkspaceNetwork> {
    return this.client.workspaceNetwork(workspaceId);
  }

  /**
   * Replaces a restricted workspace's egress policy; new connections see it at once. Rejects
   * with 400 (`field: "egress"`, the message names the rule) for a bad policy, 409 when the
   * workspace is not restricted.
   */
  setNetwork(workspaceId: string, egress: EgressPolicy): Promise<WorkspaceNetwork> {
    return this.client.setWorkspaceNetwork(workspaceId, egress);
  }

  // -- commands ---------------------------------------------------------------------------

  /**
   * Starts a command and returns its run handle at once (`status: "running"`). A run id is not
   * success: read `command()` or `wait()` until the status is terminal, then check
   * `status`, `exitCode` and `truncated`.
   */
  async exec(workspaceId: string, options: ExecOptions): Promise<SandboxRun> {
    const { stdin, idempotencyKey, retries, ...rest } = options;
    const req: StartCommandRequest = defined({ ...rest });
    if (typeof stdin === "string") req.stdin = stdin;
    else if (stdin !== undefined) {
      req.stdin = Buffer.from(stdin).toString("base64");
      req.stdinEncoding = "base64";
    }
    return decodeOutput(await this.client.startCommand(workspaceId, req, defined({ idempotencyKey, retries })));
  }

  /** The run now; with `waitMs`, waits (server-capped at 60 s) until it is terminal. */
  async command(workspaceId: string, runId: string, options: { waitMs?: number } = {}): Promise<SandboxRun> {
    return decodeOutput(await this.client.command(workspaceId, runId, options));
  }

  /**
   * Long-polls until the run is terminal. With `timeoutMs`, gives up after that long and
   * resolves with the run as it is then (still `running`): check `status`.
   */
  async wait(workspaceId: string, runId: string, options: { timeoutMs?: number } = {}): Promise<SandboxRun> {
    const deadline = options.timeoutMs === undefined ? Infinity : Date.now() + options.timeoutMs;
    for (;;) {
      const left = deadline - Date.now();
      const waitMs = Math.max(0, Math.min(TERMINAL_WAIT_CAP_MS, Math.ceil(left)));
      const run = await this.client.command(workspaceId, runId, waitMs > 0 ? { waitMs } : {});
      if (isTerminal(run) || Date.now() >= deadline) return decodeOutput(run);
    }
  }

  /** Kills the run's whole process tree; resolves with the run (`cancelled`). 409 when it had finished. */
  async cancel(workspaceId: string, runId: string): Promise<SandboxRun> {
    return decodeOutput(await this.client.cancelCommand(workspaceId, runId));
  }

  /**
   * Streams the run's output as it is produced (chunks are raw bytes; a multi-byte character
   * may span two chunks) and resolves with the final run when it ends.
   */
  async followOutput(workspaceId: string, runId: string, options: FollowOptions = {}): Promise<SandboxRun> {
    const { onStdout, onStderr, onGap, signal, offset, retries } = options;
    const run: Run = await this.client.followOutput(
      workspaceId,
      runId,
      defined({
        onOutput: (c: { stream: string; offset: number; data: Buffer }) =>
          (c.stream === "stdout" ? onStdout : onStderr)?.(c.data, c.offset),
        onGap,
        signal,
        offset,
        retries,
      }),
    );
    return decodeOutput(run);
  }

  // -- services ---------------------------------------------------------------------------

  /** Starts a supervised foreground service. The result's `id` is its name. */
  async startService(workspaceId: string, request: StartServiceRequest): Promise<SandboxService> {
    return toService(await this.client.startService(workspaceId, request));
  }

  /** The service with every attempt and its output (`serviceId` is the service's name). */
  async service(workspaceId: string, serviceId: string): Promise<SandboxService> {
    return toService(await this.client.service(workspaceId, serviceId));
  }

  async services(workspaceId: string): Promise<SandboxService[]> {
    return (await this.client.services(workspaceId)).map(toService);
  }

  /**
   * Stops it deliberately: no restart follows. Resolves once it is stopped (state `stopped`,
   * the stopped attempt last in `attempts`), within its `stopTimeoutMs` + 5 s.
   */
  async stopService(workspaceId: string, serviceId: string): Promise<SandboxService> {
    return toService(await this.client.stopService(workspaceId, serviceId));
  }

  /** A fresh attempt (after stopping the running one); resets `restartCount`. */
  async restartService(workspaceId: string, serviceId: string): Promise<SandboxService> {
    return toService(await this.client.restartService(workspaceId, serviceId));
  }

  /** Stops the service and forgets it and its attempts. */
  deleteService(workspaceId: string, serviceId: string): Promise<DeletedService> {
    return this.client.deleteService(workspaceId, serviceId);
  }
}

function toService(s: Service): SandboxService {
  const { id, attempts, ...rest } = s;
  return { ...rest, id: s.name, serviceId: id, attempts: attempts.map((a) => (a.state === "running" ? a : (decodeOutput(a) as SandboxAttempt))) };
}

export { CONTAINER_CHECKS, NETWORK_CHECKS };
