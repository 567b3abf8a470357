// The objects of the station-sandbox HTTP API (docs/api.md), exactly as the controller sends
// them. Timestamps are RFC 3339 strings ("2026-11-29T10:40:07.123Z"); a field documented as
// "null until known" is `T | null`; a field that is sometimes absent is optional.

/** `{"error":{"code","message","field"}}`: the body of every error answer. */
export type ErrorCode =
  | "invalid_argument"
  | "unauthorized"
  | "not_found"
  | "method_not_allowed"
  | "forbidden"
  | "conflict"
  | "paused"
  | "in_progress"
  | "precondition_failed"
  | "payload_too_large"
  | "range_not_satisfiable"
  | "unsupported_media_type"
  | "upgrade_required"
  | "too_many_requests"
  | "not_implemented"
  | "unavailable"
  | "insufficient_storage"
  | "internal";

export interface ErrorBody {
  error: { code: ErrorCode | (string & {}); message: string; field?: string };
}

// ---------------------------------------------------------------------------------------------
// Worker

export interface ReadyCheck {
  /** `store`, `cgroup`, `agent`, `runtime`, `images`, `image`, `seccompProfile`, … */
  name: string;
  ok: boolean;
  message: string;
}

/** `GET /v1/ready` (200 when ready, else 503 with the same body). */
export interface ReadyReport {
  ready: boolean;
  defaultAdapter: AdapterKind;
  checks: ReadyCheck[];
}

export interface WorkerLimits {
  maxWorkspaces: number;
  maxRunningPerWorkspace: number;
  defaultTimeoutMs: number;
  maxTimeoutMs: number;
  defaultOutputBytes: number;
  maxOutputBytes: number;
  maxWaitMs: number;
  maxBodyBytes: number;
}

/** `GET /v1/worker`. */
export interface WorkerInfo {
  name: string;
  version: string;
  adapters: AdapterKind[];
  runtime: string;
  cgroup: string;
  workspaces: number;
  /** The one tenant a private worker serves (--tenant); null on a shared worker. */
  tenant?: string | null;
  /** Who the request's token is on this worker: its scope and tenant (null: none). */
  caller?: { scope: "admin" | "tenant" | "read"; tenant: string | null };
  limits: WorkerLimits;
  /** Free and used capacity (workers that report it). */
  capacity?: {
    workspaces: { max: number; used: number; free: number };
    memoryBytes: { total: number; available: number };
    cpus: number;
  };
}

// ---------------------------------------------------------------------------------------------
// Workspaces

export type AdapterKind = "host" | "container";
export type WorkspaceState = "creating" | "ready" | "paused" | "stopped" | "failed" | "deleting";
/** What a workspace idle for `idleTimeoutMs` does. */
export type IdleAction = "stop" | "pause";
export type NetworkMode = "none" | "bridge" | "restricted";

interface WorkspaceBase {
  /** `<worker>-<26 chars of [a-z2-7]>`. */
  id: string;
  worker: string;
  /** The tenant whose token created it; null: the operator's. */
  tenant?: string | null;
  state: WorkspaceState;
  reason: string | null;
  home: string;
  workdir: string;
  /** The names given; every value reads "[redacted]" (values reach commands, not clients). */
  env: Record<string, string>;
  /** 0 means unlimited. */
  cpus: number;
  /** The limit in force: the worker's default when create named none; 0 (unlimited) only from
   * a worker whose default is 0. */
  memoryMb: number;
  /** The limit in force, as memoryMb. */
  pidsLimit: number;
  /** Commands running now (sent by the controller, not listed in docs/api.md). */
  runningCommands?: number;
  /** A command runs, a service is active or a terminal is attached. */
  busy: boolean;
  /**
   * The last moment it was busy or an API call acted on it (looking at the workspace is
   * none); now while busy. Kept in memory: a controller restart counts from its own start.
   */
  lastActivityAt: string;
  /** Stopped (or paused: `idleAction`) once idle this long; 0: never. */
  idleTimeoutMs: number;
  /** What being idle for `idleTimeoutMs` does. */
  idleAction?: IdleAction;
  /** When it was paused, while it is; null otherwise. */
  pausedAt?: string | null;
  /** Once paused, a command, terminal, file write or service start resumes it. */
  autoResume?: boolean;
  /** Why a stopped workspace stopped: `"idle"` (idleTimeoutMs) or `"lost"`; null otherwise. */
  stopReason: "idle" | "lost" | null;
  /**
   * What /proc and /sys/devices/system/cpu inside tell: `"lxcfs"` (the workspace's limits and
   * its own uptime), `"lxcfs-lost"` (its lxcfs died since it started: restart it), `"host"`
   * (the host's numbers), `"runsc"` (gVisor's own).
   */
  procView: "lxcfs" | "lxcfs-lost" | "host" | "runsc";
  /** Its name, unique among the tenant's workspaces on its worker; null when none. */
  name: string | null;
  /** Its labels (`{}` when none). */
  labels: Record<string, string>;
  createdAt: string;
  updatedAt: string;
}

export interface HostWorkspace extends WorkspaceBase {
  adapter: "host";
}

export interface ContainerWorkspace extends WorkspaceBase {
  adapter: "container";
  /** The digest reference it runs, `name@sha256:<hex>`. */
  image: string;
  seccompProfile: string;
  seccompDigest: string;
  network: NetworkMode;
  runtime: string;
  /** The CPUs it is pinned to for `cpus` ("0", "1,3"); absent: every CPU. */
  cpuset?: string;
}

/**
 * One rule of a restricted workspace's egress policy: a `cidr` (IPv4 address or network, host
 * bits zero) or a `domain` (`github.com`: that name only; `*.npmjs.org`: every name below
 * npmjs.org, not npmjs.org itself). `ports` (1-65535, at most 32; absent: every port) and
 * `proto` (absent: tcp and udp for a cidr, tcp for a domain) narrow it.
 */
export type EgressRule = ({ cidr: string; domain?: never } | { domain: string; cidr?: never }) & {
  ports?: number[];
  proto?: "tcp" | "udp";
};

/** A restricted workspace's egress policy: default deny, at most 64 rules. */
export interface EgressPolicy {
  allow?: EgressRule[];
}

/** `GET /v1/workspaces/{id}/network` counters. */
export interface NetworkCounters {
  /** New connections the policy accepted. */
  allowed: number;
  /** Packets dropped by the policy or the blocked ranges. */
  denied: number;
  /** DNS queries answered (since the controller started). */
  dnsAllowed: number;
  /** DNS queries refused with NXDOMAIN (since the controller started). */
  dnsRefused: number;
}

/**
 * A destination the network refused. For a refused DNS query: the resolver's address, port 53,
 * `udp` and the `name` asked.
 */
export interface Denial {
  address: string;
  /** 0 when the protocol has no ports. */
  port: number;
  proto: "tcp" | "udp" | "icmp" | "ip";
  name?: string;
  /** The --network-allow class that blocks the address for every workspace, when one does. */
  class?: string;
}

/** One of the last 100 destinations a workspace's network refused (most recent first). */
export interface RefusedDestination extends Denial {
  /** Logged denials of it (at most 10 a second, bursts of 20, per workspace). */
  count: number;
  firstAt: string;
  lastAt: string;
}

/** `run.network`: what the workspace's network refused while the run ran. */
export interface RunNetwork {
  /** Packets the firewall dropped plus DNS queries the resolver refused. */
  denied: number;
  /** The last denial logged in the run's window; absent when none was. */
  lastDenied?: Denial & { at: string };
}

/** `GET|PUT /v1/workspaces/{id}/network`; mode `none` has `mode` only. */
export interface WorkspaceNetwork {
  mode: NetworkMode;
  address?: string;
  gateway?: string;
  /** Restricted only: the policy as the controller normalised it. */
  egress?: EgressPolicy;
  counters?: NetworkCounters;
  /** Bridge and restricted: the last 100 refused destinations (kept in memory only). */
  refused?: RefusedDestination[];
}

/** What part of a usage history to ask for (docs/api.md, "Usage history"). */
export interface UsageOptions {
  /**
   * From when: an RFC 3339 time or a duration back from now as the API takes it
   * (`"2026-12-07T07:00:00Z"`, `"1h"`, `"90s"`), a `Date`, or a number of milliseconds since
   * the epoch. Absent: an hour ago.
   */
  since?: string | number | Date;
  /** Each point's width: `"5s"`, `"1m"`, or a number of milliseconds (100 ms to 24 h). Absent: the sampling interval within the last hour, else a minute. */
  step?: string | number;
}

/** One point of a usage history: the step starting at `t`. */
export interface UsageSample {
  /** RFC 3339, UTC. */
  t: string;
  /** Cores used over the step (CPU time / `spanMs`). */
  cpu: number;
  /** Memory in use averaged over the step (less inactive file cache). */
  memoryBytes: number;
  memoryMaxBytes: number;
  /** The most processes and threads. */
  pids: number;
  /** Bytes received and sent within the step (0 without a network). */
  rxBytes: number;
  txBytes: number;
  /** The time its samples cover. */
  spanMs: number;
}

/** `GET /v1/workspaces/{id}/usage?since=&step=` (workspaceId, limits) or `GET /v1/worker/usage` (worker, tenant). */
export interface UsageHistory {
  workspaceId?: string;
  worker?: string;
  tenant?: string | null;
  stepMs: number;
  /** How often the controller samples (`--usage-interval-ms`). */
  intervalMs: number;
  /** The limits in force; null where there is none. */
  limits?: { cpus: number | null; memoryBytes: number | null; pidsLimit: number | null };
  /** Oldest first; a step without samples is absent. */
  samples: UsageSample[];
}

export type Workspace = HostWorkspace | ContainerWorkspace;

/**
 * `POST /v1/workspaces`. `image`, `seccompProfile`, `network`, `egress` only for the container
 * adapter; `egress` only with `network: "restricted"` (absent there: every destination denied).
 */
export interface CreateWorkspaceRequest {
  adapter?: AdapterKind;
  image?: string;
  seccompProfile?: string;
  network?: NetworkMode;
  egress?: EgressPolicy;
  env?: Record<string, string>;
  /** 0 or absent: no CPU limit. */
  cpus?: number;
  /** 0 or absent: the worker's default (`--default-memory-mb`). */
  memoryMb?: number;
  /** 0 or absent: the worker's default (`--default-pids-limit`). */
  pidsLimit?: number;
  /** Stop the workspace once idle this long (0 or 1000 ms to 30 days; 0: never). */
  idleTimeoutMs?: number;
  /** What idleTimeoutMs does: `stop` (the default) or `pause`. */
  idleAction?: IdleAction;
  /** Once paused, a command, terminal, file write or service start resumes it first. */
  autoResume?: boolean;
  /** `s-…`: start from that snapshot's files and image (not with `image`). */
  snapshot?: string;
  /**
   * `[a-z0-9][a-z0-9._-]{0,62}`, not shaped as an id; unique among the tenant's workspaces on
   * its worker (409 naming the holder). Usable wherever an id is.
   */
  name?: string;
  /** At most 32; keys `[a-z0-9][a-z0-9._/-]{0,62}`, values UTF-8 of at most 256 bytes. */
  labels?: Record<string, string>;
}

/**
 * `PATCH /v1/workspaces/{id}`, a JSON merge patch: `name: null` removes the name; in `labels` a
 * string sets the key, `null` removes it, the other labels stay; `labels: null` removes them all.
 */
export interface UpdateWorkspaceRequest {
  name?: string | null;
  labels?: Record<string, string | null> | null;
}

/**
 * `GET /v1/workspaces`'s filters, all of which must hold: `labels` a record (a value of `null`
 * or `true`: the key is set, whatever its value) or strings `"k=v"` / `"k"`; `name`; `state`.
 */
export interface WorkspaceFilter {
  labels?: Record<string, string | null | true> | string[];
  name?: string;
  state?: string;
}

/** `POST /v1/workspaces/{id}/snapshots`. */
export interface SnapshotRequest {
  /** 1-128 characters. */
  name?: string;
  /** The processes too (CRIU); refused (501) naming what the worker lacks where it cannot. */
  memory?: boolean;
}

/**
 * A workspace's HOME and root filesystem changes kept as an image of the worker's store
 * (docs/api.md, "Snapshots and fork").
 */
export interface Snapshot {
  /** `s-WORKER-…`: it names the worker that keeps it (`s-…` alone: taken before ids did). */
  id: string;
  /** The worker that keeps it. */
  worker: string;
  workspaceId: string;
  name: string | null;
  createdAt: string;
  sizeBytes: number;
  /** The workspace's image it was taken on (null: a host workspace). */
  baseImage: string | null;
  /** The snapshot's own image. */
  image: string | null;
  memory: boolean;
  /** How long the workspace was paused for it. */
  pausedMs: number;
  /** Its image is on disk (fsync()ed); false in a create's answer until then. */
  durable: boolean;
}

/** `POST /v1/workspaces/{id}/fork`. */
export interface ForkResult {
  workspaces: Workspace[];
  /** The snapshot the forks were made from. */
  snapshot: string;
  /** How long the source was paused. */
  pausedMs: number;
}

/** `DELETE /v1/workspaces/{id}`. */
export interface DeletedWorkspace {
  id: string;
  state: "deleted";
}

// ---------------------------------------------------------------------------------------------
// Runs

export type RunStatus =
  | "running"
  | "exited"
  | "killed"
  | "timed_out"
  | "cancelled"
  | "failed_to_start"
  | "lost";

export type OutputEncoding = "utf-8" | "base64";

/** The fields of a run that are not its output. */
export interface RunInfo {
  /** `r-<26 chars>`. */
  id: string;
  workspaceId: string;
  command: string;
  cwd: string | null;
  status: RunStatus;
  exitCode: number | null;
  signal: number | null;
  oomKilled: boolean;
  reason: string | null;
  stdoutBytes: number;
  stderrBytes: number;
  truncated: boolean;
  timeoutMs: number;
  maxOutputBytes: number;
  createdAt: string;
  startedAt: string | null;
  endedAt: string | null;
  durationMs: number | null;
  cpuMs: number | null;
  peakMemoryBytes: number | null;
  /**
   * On a workspace with a network (bridge, restricted): what it refused while the run ran, the
   * count so far while running. Absent without a network.
   */
  network?: RunNetwork;
}

/**
 * Output parts as the API sends them: text when `encoding` is `utf-8`, base64 when `base64`.
 * `stdoutTail`/`stderrTail` exist only when that stream overflowed its head.
 */
export interface WireOutput {
  stdout: string;
  stderr: string;
  stdoutTail?: string;
  stderrTail?: string;
  encoding: OutputEncoding;
}

/** A run as `GET /v1/workspaces/{id}/commands/{run}` sends it. */
export type Run = RunInfo & WireOutput;

/** `GET /v1/workspaces/{id}/commands` lists runs without output fields. */
export type RunSummary = RunInfo;

/** `POST /v1/workspaces/{id}/commands`. */
export interface StartCommandRequest {
  command: string;
  cwd?: string;
  env?: Record<string, string>;
  stdin?: string;
  stdinEncoding?: OutputEncoding;
  timeoutMs?: number;
  maxOutputBytes?: number;
}

// ---------------------------------------------------------------------------------------------
// Output streams (SSE on …/commands/{run}/output and …/services/{name}/logs)

export type StreamName = "stdout" | "stderr";

/** `event: output`; `data` is base64 on the wire, a Buffer here. */
export interface OutputChunk {
  stream: StreamName;
  offset: number;
  data: Buffer;
}

/** `event: gap`: `bytes` bytes of `stream` at `offset` this watcher will never see. */
export interface OutputGap {
  stream: StreamName;
  offset: number;
  bytes: number;
}

// ---------------------------------------------------------------------------------------------
// Images

export interface ImageConfig {
  user: string;
  env: string[];
  workdir: string;
}

export interface Image {
  /** `sha256:<64 hex>`, the manifest's digest. */
  digest: string;
  name: string | null;
  reference: string;
  size: number;
  layers: number;
  config: ImageConfig;
  usedBy: string[];
  /** null: the operator's image; else the tenant that pulled it. */
  tenant?: string | null;
  createdAt: string;
}

/** `POST /v1/images` importing an OCI layout (a directory or a tar) on the worker. */
export interface ImportImageRequest {
  path: string;
  name?: string;
}

/** `POST /v1/images` pulling `registry/name@sha256:…`. */
export interface PullImageRequest {
  reference: string;
  registry?: string;
  plainHttp?: boolean;
}

export interface DeletedImage {
  digest: string;
  removed: true;
}

// ---------------------------------------------------------------------------------------------
// Services

export type RestartPolicyName = "no" | "on-failure" | "always";

export interface Backoff {
  multiplier: number;
  maxDelayMs: number;
}

export interface RestartPolicy {
  policy: RestartPolicyName;
  /**
   * Automatic restarts in a row before the service is `exhausted`: restarts made since the
   * service started, since a `restartService()`, or since an attempt that ran `resetAfterMs`
   * or longer, whichever was last. Not attempts (`2` → a crash loop runs 3 attempts) and not
   * for the service's lifetime.
   */
  maxRestarts: number;
  delayMs: number;
  /** An attempt that ran this long resets the restart count and the backoff; 0 never. */
  resetAfterMs: number;
  /** Present only when the service was created with one. */
  backoff?: Backoff;
}

export type ServiceState = "starting" | "running" | "backoff" | "stopped" | "failed" | "exhausted";

export type AttemptEndReason =
  | "exited"
  | "killed"
  | "stopped"
  | "restarted"
  | "failed_to_start"
  | "daemonized"
  | "lost";

/** One run of a service that ended. In lists it carries only the byte counts (no output). */
export interface EndedAttemptInfo {
  number: number;
  /** `ended`: its result is recorded (`endedAt`, `endReason`, exit code or signal, output). */
  state: "ended";
  startedAt: string;
  endedAt: string | null;
  durationMs: number | null;
  exitCode: number | null;
  signal: number | null;
  endReason: AttemptEndReason | null;
  reason: string | null;
  daemonized: boolean;
  outputDropped: boolean;
  stdoutBytes: number;
  stderrBytes: number;
}

/**
 * The attempt running now, last in `attempts` until it ends; then the ended attempt of the same
 * `number` takes its place (never both, never neither). No end or exit fields, no output (follow
 * `serviceLogs()` for that).
 */
export interface RunningAttemptInfo {
  number: number;
  state: "running";
  startedAt: string | null;
  /** Its main process as the agent sees it; null before it is known. */
  pid: number | null;
  /**
   * Bytes written so far, as the workspace's agent last reported them (at most every 250 ms
   * while it writes); null from an agent too old to report them.
   */
  stdoutBytes: number | null;
  stderrBytes: number | null;
}

export type AttemptInfo = EndedAttemptInfo | RunningAttemptInfo;

/** An attempt as `GET …/services/{name}` sends it: an ended one with its output. */
export type Attempt = (EndedAttemptInfo & Partial<WireOutput> & { truncated?: boolean }) | RunningAttemptInfo;

export interface Service {
  /** `svc-…`, the controller's id. Paths name a service by `name`, not by this id. */
  id: string;
  workspaceId: string;
  name: string;
  command: string;
  cwd: string | null;
  /** The names given; every value reads "[redacted]" (values reach commands, not clients). */
  env: Record<string, string>;
  restart: RestartPolicy;
  stopSignal: string | number;
  stopTimeoutMs: number;
  autostart: boolean;
  maxOutputBytes: number;
  state: ServiceState;
  reason: string | null;
  stopping: boolean;
  restartCount: number;
  nextRestartAt: string | null;
  mainPid: number | null;
  currentAttempt: number | null;
  currentAttemptStartedAt: string | null;
  createdAt: string;
  updatedAt: string;
  attempts: Attempt[];
}

/** `POST /v1/workspaces/{id}/services`. */
export interface StartServiceRequest {
  /** `[a-z0-9][a-z0-9._-]{0,62}`, unique in the workspace. */
  name: string;
  /** Runs as `/bin/sh -c` in the foreground: do not append `&` or daemonize. */
  command: string;
  cwd?: string;
  env?: Record<string, string>;
  restart?: {
    policy?: RestartPolicyName;
    /** 0-1000000, default 5: restarts in a row (see `RestartPolicy.maxRestarts`). */
    maxRestarts?: number;
    delayMs?: number;
    /** 0-86400000, default 60000: an attempt that ran this long resets the count; 0 never. */
    resetAfterMs?: number;
    backoff?: { multiplier?: number; maxDelayMs?: number };
  };
  /** A name (`"SIGTERM"`, `"TERM"`) or a number 1-64. */
  stopSignal?: string | number;
  stopTimeoutMs?: number;
  autostart?: boolean;
}

export interface DeletedService {
  name: string;
  deleted: true;
}

// ---------------------------------------------------------------------------------------------
// Terminals

export type TerminalState = "starting" | "running" | "exited" | "closed" | "failed" | "lost";

export interface Terminal {
  /** `t-…`. */
  id: string;
  command: string;
  cwd?: string | null;
  cols: number;
  rows: number;
  state: TerminalState;
  reason?: string | null;
  pid: number | null;
  exitCode: number | null;
  signal: number | null;
  outputBytes: number;
  createdAt: string;
  startedAt: string | null;
  endedAt: string | null;
}

/** `POST /v1/workspaces/{id}/terminals`. */
export interface CreateTerminalRequest {
  /** Absent: the login shell of the workspace's user. */
  command?: string;
  cols: number;
  rows: number;
  cwd?: string;
  env?: Record<string, string>;
}

/** The `exit` message of a terminal attach. */
export interface TerminalExit {
  exitCode: number | null;
  signal: number | null;
  state: TerminalState;
}

// ---------------------------------------------------------------------------------------------
// Files (done by the workspace's agent, inside the sandbox, as the sandbox's user)

export type FileType = "file" | "dir" | "symlink" | "fifo" | "socket" | "char" | "block";

/** `GET …/files/stat` and each entry of `…/files/list`. */
export interface FileEntry {
  name: string;
  /** Absolute, in the sandbox's view (`/home/node/workspace/a.txt` in a container). */
  path: string;
  type: FileType;
  size: number;
  /** Octal permission bits, `"0644"`. */
  mode: string;
  /** RFC 3339 with milliseconds. */
  mtime: string;
  uid: number;
  gid: number;
  /** Regular files only: for `ifMatch`. */
  etag?: string | null;
  /** A symlink's target as stored (never followed); else null. */
  linkTarget: string | null;
}

/** `GET …/files/list`: sorted by name, at most 10,000 entries. */
export interface FileList {
  path: string;
  entries: FileEntry[];
  /** More entries than were sent. */
  truncated: boolean;
}

/** `DELETE …/files`. */
export interface DeletedFile {
  path: string;
  deleted: true;
}

export type FileEventType = "ready" | "created" | "modified" | "deleted" | "moved" | "overflow";

/** One event of `GET …/files/watch`. */
export interface FileEvent {
  /** `ready` once the watch is in place; `overflow`: events were lost, list again. */
  type: FileEventType | (string & {});
  path?: string;
  /** `moved`: the new path. */
  to?: string;
  kind?: FileType;
  seq: number;
}

export interface WriteFileOptions {
  /** Octal permission bits (`"0600"` or 0o600); default the replaced file's mode, or 0644. */
  mode?: string | number;
  /** Make missing parent directories. */
  parents?: boolean;
  /** 409 `conflict` when the path exists. */
  exclusive?: boolean;
  /** An etag: 412 `precondition_failed` when the file changed since (or is gone). */
  ifMatch?: string;
}

/** A byte range: `{start, end}` (end inclusive), `{start}` to the end, or `{suffix: N}` the last N bytes. */
export type ByteRange = { start: number; end?: number } | { suffix: number };

export interface ReadFileOptions {
  /** 413 `payload_too_large` for a file (or range) larger than this. */
  maxBytes?: number;
  range?: ByteRange;
  signal?: AbortSignal;
}

// ---------------------------------------------------------------------------------------------
// Secrets (values never come back)

export interface Secret {
  name: string;
  /** The only host the secret is released for; null: any. */
  host: string | null;
  username: string;
  expiresAt: string | null;
  createdAt: string;
  updatedAt: string;
  /** Listed until deleted once it expired. */
  expired?: boolean;
}

/** `PUT …/secrets/{name}`. */
export interface SetSecretRequest {
  /** 1-16384 bytes, no NUL. Never in any answer. */
  value: string;
  /** A DNS name or `name:port`; the credential helper releases it for this host only. */
  host?: string;
  /** Default `x-access-token` (GitHub's for installation tokens). */
  username?: string;
  /** RFC 3339; a past time is 400. */
  expiresAt?: string;
}

export interface DeletedSecret {
  name: string;
  deleted: true;
}

// ---------------------------------------------------------------------------------------------
// Previews: a port of a workspace given a URL of its own (docs/api.md, "Previews")

/** `POST …/ports` (`exposePort`'s options). */
export interface ExposePortOptions {
  /** No token needed to open the URL. Default false: token access. */
  public?: boolean;
  /** The URL stops working after this. Default 24 hours, at most 30 days. */
  expiresInMs?: number;
}

/**
 * An exposed port. `host` is its own DNS label under the controller's preview domain, `url`
 * opens it (a request whose Host matches no live exposure is 404, like an expired or revoked
 * one).
 */
export interface PortExposure {
  port: number;
  host: string;
  url: string;
  access: "token" | "public";
  expiresAt: string;
  createdAt: string;
}

/**
 * `exposePort`'s answer. Token access: `token` (shown this once; send `Authorization: Bearer
 * TOKEN`) and `openUrl`, the link a browser opens once (the preview sets a cookie of that host
 * and redirects to `url`). Public access: neither.
 */
export interface ExposedPort extends PortExposure {
  token?: string;
  openUrl?: string;
}

/** A TCP socket listening in the workspace's network namespace. */
export interface ListeningPort {
  port: number;
  /** The address it is bound to: `0.0.0.0`, `127.0.0.1`, `::`, … */
  address: string;
  proto: string;
  /** As the workspace sees it; null when no process of the workspace holds the socket. */
  pid: number | null;
  command: string | null;
}

/** `GET …/ports`: the exposures (never their tokens) and what listens. */
export interface PortList {
  exposed: PortExposure[];
  listening: ListeningPort[];
}

/** What an event is about (GET /v1/events, `types` filter). */
export type EventType = "workspace" | "run" | "service" | "terminal";

/**
 * A state change (docs/api.md, "Events"): `change` is `created`, `state`, `ended` or `deleted`;
 * `state` the state entered (a run's status), null for `deleted`. `seq` grows strictly, across
 * controller restarts too.
 */
export interface StationStateEvent {
  seq: number;
  type: EventType;
  change: "created" | "state" | "ended" | "deleted";
  id: string;
  workspaceId: string;
  state?: string | null;
  at: string;
  reason?: string;
}

/** Events after `from` up to `seq` are no longer kept: `missed` of them (null: unknown, the controller restarted). */
export interface StationGapEvent {
  seq: number;
  type: "gap";
  from: number;
  missed: number | null;
}

export type StationEvent = StationStateEvent | StationGapEvent;

export interface EventsOptions {
  /** Only this workspace's events. */
  workspace?: string;
  /** Only these types. */
  types?: EventType[];
  /** Resume after this seq (the last event had); absent: from now on. */
  since?: number;
  /** Ends the iteration (it then throws an AbortError). */
  signal?: AbortSignal;
  /** Connections in a row without a new event after a drop before the iteration throws. Default 5. */
  retries?: number;
}

// -- code contexts (docs/api.md, "Code contexts") ------------------------------------------

export type ContextLanguage = "python" | "javascript";
export type ContextState = "idle" | "busy" | "dead";
export type ExecutionStatus = "running" | "ok" | "error" | "timed_out" | "interrupted";

export interface ContextInfo {
  id: string;
  workspaceId: string;
  language: ContextLanguage;
  state: ContextState;
  /** Why it is dead (an OOM kill, a kernel that exited), else null. */
  reason: string | null;
  cwd: string;
  executionCount: number;
  createdAt: string;
  cpuMs: number | null;
  memoryBytes: number | null;
}

export interface CreateContextRequest {
  language: ContextLanguage;
  cwd?: string;
  env?: Record<string, string>;
}

export interface CellErrorInfo {
  name: string;
  value: string;
  traceback: string[];
}

/** An execution as the API sends it (binary MIME values base64). */
export interface ExecutionInfo {
  id: string;
  contextId: string;
  runId?: string | null;
  status: ExecutionStatus;
  executionCount?: number | null;
  stdout?: string;
  stderr?: string;
  stdoutTail?: string | null;
  stderrTail?: string | null;
  stdoutBytes?: number;
  stderrBytes?: number;
  truncated?: boolean;
  encoding?: "utf-8" | "base64";
  results?: { type: string; data: Record<string, unknown>; truncated?: boolean }[];
  error?: CellErrorInfo | null;
  createdAt?: string;
  endedAt?: string | null;
  durationMs?: number | null;
  /** The cell's exec client's run. */
  cpuMs?: number | null;
  peakMemoryBytes?: number | null;
  /** The kernel's CPU time during the cell; null when unknown (a cell across a controller restart). */
  kernelCpuMs?: number | null;
  /** The kernel's memory in use at the cell's end; null when unknown. */
  kernelMemoryBytes?: number | null;
}
