// StationClient: one typed method per endpoint of docs/api.md, objects exactly as the API
// sends them (run output stays as the wire has it: text or base64 per `encoding`).

import { randomUUID } from "node:crypto";

import { StationError, makeError } from "./errors.js";
import { CONNECT_TIMEOUT_MS, Transport, resolveTimeout, type ConnectionOptions, type RawResponse } from "./transport.js";
import { Router, unavailable, type Route, type Wire } from "./route.js";
import {
  DISCOVER,
  WorkerUnavailableError,
  placeWorker,
  reasonOf,
  resolveWorkers,
  snapshotWorkerOf,
  workersOfList,
  type UnreachableWorker,
  type WorkerCapacity,
  type WorkerState,
} from "./workers.js";
import type { Readable } from "node:stream";
import { WsConnection } from "./websocket.js";
import type {
  EventsOptions,
  StationEvent,
  CreateTerminalRequest,
  ExposedPort,
  ExposePortOptions,
  CreateWorkspaceRequest,
  UpdateWorkspaceRequest,
  WorkspaceFilter,
  DeletedImage,
  DeletedService,
  DeletedFile,
  DeletedSecret,
  DeletedWorkspace,
  EgressPolicy,
  ForkResult,
  Snapshot,
  SnapshotRequest,
  FileEntry,
  FileEvent,
  FileList,
  Image,
  ImportImageRequest,
  OutputChunk,
  OutputGap,
  PortList,
  PullImageRequest,
  ReadFileOptions,
  ReadyReport,
  Run,
  RunSummary,
  Secret,
  Service,
  SetSecretRequest,
  StartCommandRequest,
  StartServiceRequest,
  StreamName,
  Terminal,
  TerminalExit,
  UsageHistory,
  UsageOptions,
  WorkerInfo,
  Workspace,
  WorkspaceNetwork,
  WriteFileOptions,
  ContextInfo,
  CreateContextRequest,
  ExecutionInfo,
} from "./types.js";
import { Contexts } from "./contexts.js";

export type { ConnectionOptions } from "./transport.js";

/** Callbacks of an output stream (a run's output, a service's logs). */
export interface OutputHandlers {
  /** A chunk of output, in order per stream; `offset` is its position in the stream. */
  onOutput?: (chunk: OutputChunk) => void;
  /** Bytes this watcher missed (before the watch began beyond the kept head, or fell behind). */
  onGap?: (gap: OutputGap) => void;
  /** Stops following; the promise then rejects with an AbortError. */
  signal?: AbortSignal;
  /**
   * Where to begin, per stream (default 0): the offset after the last byte already had, e.g.
   * from an earlier follow. Bytes no longer kept from there come as one gap.
   */
  offset?: { stdout?: number; stderr?: number };
  /**
   * A dropped connection is opened again from the offsets delivered so far (each byte still
   * reaches `onOutput` at most once, what is no longer kept comes as a gap); this many
   * connections in a row that bring nothing new, then the follow rejects. Default 3; 0: none.
   */
  retries?: number;
}

/** The stream dropped before its end: worth connecting again. */
class StreamDropped extends Error {}

export interface AttachHandlers {
  /** Raw terminal output: the scrollback first, then live output. */
  onData?: (data: Buffer) => void;
  /** `bytes` bytes of output this attacher will never see. */
  onGap?: (bytes: number) => void;
  /** The terminal ended (the connection closes after this). */
  onExit?: (exit: TerminalExit) => void;
  /** Keystrokes and resizes are ignored by the server. */
  readOnly?: boolean;
}

/** A live attach to a terminal (WebSocket). Closing it leaves the terminal running. */
export interface TerminalSession {
  /** Keystrokes, written to the PTY. */
  write(data: string | Uint8Array): void;
  resize(cols: number, rows: number): void;
  /** Detaches (the terminal keeps running). */
  close(): void;
  /** Resolves when the connection is closed: with the exit when the terminal ended, else null. */
  readonly closed: Promise<TerminalExit | null>;
}

const STATUS_OF_CODE: Record<string, number> = {
  invalid_argument: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  paused: 409,
  unavailable: 503,
  internal: 500,
};

/**
 * Options of the creating calls: `createWorkspace`, `startCommand`, `startService`,
 * `createTerminal` (docs/api.md, "Idempotency keys"). Every create is sent with an
 * `Idempotency-Key`, and retried with the same key after a connection error (no answer came:
 * the controller was unreachable or the connection broke) or a `409 in_progress`, so a retry
 * never makes a second object: the controller answers the first one.
 */
export interface CreateOptions {
  /**
   * The key, 1-255 printable ASCII characters; default a random UUID made for this call. Pass
   * your own to retry a create yourself (after your own timeout, or from another process):
   * the same key and request within 24 h answer the object the first request made; the same
   * key with another request is a 409 `conflict`.
   */
  idempotencyKey?: string;
  /** Retries after a connection error or `in_progress`, 0-10; default 2. */
  retries?: number;
}

/** Options of `createWorkspace`: with several workers, `worker` names where to create. */
export interface CreateWorkspaceOptions extends CreateOptions {
  /**
   * With several workers: the worker to create on (by name); default the one with the most
   * free capacity (most free workspace slots, then most available memory, then the first).
   */
  worker?: string;
}

/**
 * `workspaces()`: the workspaces, and with several workers `unreachable`, the workers that did
 * not answer (their workspaces are missing from the list); always empty with one controller.
 */
export type WorkspaceList = Workspace[] & { unreachable: UnreachableWorker[] };

/**
 * `snapshots()`: the snapshots, newest first, and with several workers `unreachable`, the
 * workers that did not answer; always empty with one controller.
 */
export type SnapshotList = Snapshot[] & { unreachable: UnreachableWorker[] };

/**
 * With several workers, a create from a snapshot goes to the worker its id names (an id of the
 * older shape names none: `worker` must).
 */
function createWorkerOf(snapshot: string, worker: string | undefined): string {
  const named = snapshotWorkerOf(snapshot);
  if (named === null) {
    if (worker === undefined)
      throw new TypeError(`snapshot ${snapshot} names no worker (it was taken before snapshot ids carried one): name it (options.worker)`);
    return worker;
  }
  if (worker !== undefined && worker !== named)
    throw new TypeError(`snapshot ${snapshot} is kept by worker ${named}: a workspace made from it starts there, not on ${worker}`);
  return named;
}

const CREATE_RETRY_DELAY_MS = 250;
/** A cancel is answered once the run ended, at most this late (docs/api.md)… */
const CANCEL_HOLD_MS = 10_000;
/** …and gets this much more, whatever the answer deadline: a hung worker is named soon. */
const CANCEL_TIMEOUT_MS = 5_000;

function checkIdempotencyKey(key: string): void {
  if (typeof key !== "string" || !/^[\x20-\x7e]{1,255}$/.test(key))
    throw new TypeError(`idempotencyKey must be 1-255 printable ASCII characters, not ${JSON.stringify(key)}`);
}

/** A path segment: ids, names and `sha256:<hex>` digests. */
function seg(s: string): string {
  if (typeof s !== "string" || s === "") throw new TypeError(`expected a non-empty id, got ${JSON.stringify(s)}`);
  return encodeURIComponent(s).replace(/%3A/gi, ":");
}

function query(params: Record<string, string | number | boolean | undefined>): string {
  const parts: string[] = [];
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === false) continue;
    parts.push(`${k}=${v === true ? 1 : encodeURIComponent(v)}`);
  }
  return parts.length ? `?${parts.join("&")}` : "";
}

/** `?since=&step=` of a usage history; since an hour back when neither is given (without both a workspace's path answers its use now). */
function usageQuery(o: UsageOptions): string {
  const since = o.since instanceof Date ? o.since.toISOString() : o.since;
  if (typeof since === "number" && !(Number.isInteger(since) && since >= 1e12))
    throw new TypeError(`since ${since}: a number is milliseconds since the epoch (a duration is a string such as "1h")`);
  if (o.step !== undefined && typeof o.step === "number" && !Number.isInteger(o.step))
    throw new TypeError(`step ${o.step}: a number is whole milliseconds`);
  const step = typeof o.step === "number" ? `${o.step}ms` : o.step;
  return query({ since: since === undefined && step === undefined ? "1h" : since, step });
}

/** The most workspaces one fork makes. */
const FORK_MAX = 100;
/** The longest snapshot name. */
const SNAPSHOT_NAME_MAX = 128;

function checkSnapshotRequest(r: SnapshotRequest): void {
  if (typeof r !== "object" || r === null) throw new TypeError(`expected a snapshot request object, got ${JSON.stringify(r)}`);
  const { name, memory } = r;
  if (name !== undefined && (typeof name !== "string" || name.length < 1 || name.length > SNAPSHOT_NAME_MAX || /[\x00-\x1f\x7f]/.test(name)))
    throw new TypeError(`name must be 1 to ${SNAPSHOT_NAME_MAX} characters without control characters, not ${JSON.stringify(name)}`);
  if (memory !== undefined && typeof memory !== "boolean") throw new TypeError(`memory must be true or false, not ${JSON.stringify(memory)}`);
}

/** `?label=k=v&label=k&name=&state=` of a WorkspaceFilter ("" for none). */
function workspaceQuery(f: WorkspaceFilter): string {
  const q = new URLSearchParams();
  if (Array.isArray(f.labels)) for (const l of f.labels) q.append("label", l);
  else if (f.labels) for (const [k, v] of Object.entries(f.labels)) q.append("label", v === null || v === true ? k : `${k}=${v}`);
  if (f.name !== undefined) q.append("name", f.name);
  if (f.state !== undefined) q.append("state", f.state);
  const s = q.toString().replace(/%3D/g, "=").replace(/%2F/g, "/");
  return s ? `?${s}` : "";
}

function checkCreateRequest(r: CreateWorkspaceRequest): void {
  if (r.snapshot !== undefined) {
    seg(r.snapshot);
    if (r.image !== undefined) throw new TypeError("snapshot and image are exclusive (a snapshot has its image)");
  }
  if (r.autoResume !== undefined && typeof r.autoResume !== "boolean")
    throw new TypeError(`autoResume must be true or false, not ${JSON.stringify(r.autoResume)}`);
  if (r.idleAction !== undefined && r.idleAction !== "stop" && r.idleAction !== "pause")
    throw new TypeError(`idleAction must be "stop" or "pause", not ${JSON.stringify(r.idleAction)}`);
}

/** The longest `expiresInMs` of an exposure (30 days). */
const PREVIEW_MAX_EXPIRES_MS = 30 * 24 * 3600 * 1000;

function portNumber(port: number): number {
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new TypeError(`port must be an integer from 1 to 65535, not ${JSON.stringify(port)}`);
  }
  return port;
}

/** A file path for a query: any string; the server judges it (400 naming the path). */
function filePath(p: string): string {
  if (typeof p !== "string") throw new TypeError(`expected a path string, got ${JSON.stringify(p)}`);
  return p;
}

/** `"0644"` from `"0644"`, `"644"` or `0o644`. */
function octalMode(mode: string | number): string {
  const n = typeof mode === "number" ? mode : /^[0-7]{1,4}$/.test(mode) ? parseInt(mode, 8) : NaN;
  if (!Number.isInteger(n) || n < 0 || n > 0o7777) throw new TypeError(`mode must be octal permission bits like "0644", not ${JSON.stringify(mode)}`);
  return n.toString(8).padStart(4, "0");
}

function rangeHeader(r: ReadFileOptions["range"]): Record<string, string> {
  if (!r) return {};
  if ("suffix" in r) return { Range: `bytes=-${r.suffix}` };
  return { Range: `bytes=${r.start}-${r.end ?? ""}` };
}

async function readAll(res: RawResponse, max: number | undefined, what: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of res.body) {
    n += (c as Buffer).length;
    if (max !== undefined && n > max) {
      res.body.destroy();
      throw new StationError(413, "payload_too_large", `${what}: more than the ${max} bytes asked for`);
    }
    chunks.push(c as Buffer);
  }
  return Buffer.concat(chunks);
}

function headerValue(v: string | string[] | undefined): string | null {
  return (Array.isArray(v) ? v[0] : v) ?? null;
}

function abortError(): Error {
  return new DOMException("the stream was aborted", "AbortError");
}

/**
 * The client of one controller, or of several workers: with the `workers` option (or
 * `$STATION_WORKERS`, a workers file) every call for a workspace goes to the worker its id names
 * (`w2-…` is on `w2`), `workspaces()` lists across all workers at once, `createWorkspace` creates
 * on `worker` or where the placement rule puts it, and a worker that does not answer
 * gives a `WorkerUnavailableError` naming it. Calls that name no workspace (images, `worker()`,
 * `ready()`) go to one worker: `client.on("w1")`.
 */
export class StationClient {
  private readonly t: Wire;
  private readonly router: Router | undefined;
  /** The answer deadline (ConnectionOptions.timeoutMs). */
  private readonly timeoutMs: number;
  /** How long a worker may take to answer GET /v1/worker or a list before it counts as down. */
  private readonly probeMs: number;
  private readonly perWorker = new Map<string, StationClient>();

  constructor(options: ConnectionOptions = {}) {
    this.timeoutMs = resolveTimeout(options.timeoutMs);
    this.probeMs = Math.min(CONNECT_TIMEOUT_MS, this.timeoutMs);
    const workers = resolveWorkers(options);
    if (workers) {
      this.router = new Router(workers.list, options.token, workers.source, this.timeoutMs);
      this.t = this.router;
    } else {
      this.t = new Transport({ ...options, timeoutMs: this.timeoutMs });
    }
  }

  /**
   * A client over the workers the worker at `url` lists (its `GET /v1/workers`: its `--workers`,
   * and every registered worker of a `--fleet`), each at its listed URL with `options.token`;
   * `url` absent: the one of `STATION_WORKERS=discover:URL`. The list is asked for once, here.
   */
  static async discover(url?: string, options: Omit<ConnectionOptions, "workers" | "url" | "socketPath" | "rootDir"> = {}): Promise<StationClient> {
    const fromEnv = process.env.STATION_WORKERS;
    const at = url ?? (fromEnv?.startsWith(DISCOVER) ? fromEnv.slice(DISCOVER.length) : undefined);
    if (!at) throw new TypeError("StationClient.discover: give a worker's URL (or STATION_WORKERS=discover:URL)");
    const one = new StationClient({ ...options, url: at });
    const doc = await (one.t as Transport).json("GET", "/v1/workers", undefined, undefined, {}, one.probeMs);
    return new StationClient({ ...options, workers: workersOfList(doc, at) });
  }

  /** The names of this client's workers (several workers only; else empty). */
  get workerNames(): string[] {
    return this.router?.names ?? [];
  }

  /**
   * A client of one of this client's workers, by name: for what names no workspace (images,
   * `worker()`, `ready()`). With one controller, `on()` with any name is the client itself.
   */
  on(worker: string): StationClient {
    if (!this.router) return this;
    const r = this.router.route(worker);
    let c = this.perWorker.get(worker);
    if (!c) {
      const where = r.config.url.startsWith("unix:") ? { socketPath: r.config.url.slice(5) } : { url: r.config.url };
      c = new StationClient({ ...where, token: r.transport.token, timeoutMs: this.timeoutMs });
      this.perWorker.set(worker, c);
    }
    return c;
  }

  /**
   * Each worker's state, in the configured order (one entry with one controller): up or down
   * (with why), version, capacity and workspace count, asked of all at once; a worker that does
   * not answer within 10 s (or the client's `timeoutMs`, when shorter) is down.
   */
  async workers(): Promise<WorkerState[]> {
    const routes: Route[] = this.router ? [...this.router.routes.values()] : [];
    if (!this.router) {
      const t = this.t as Transport;
      try {
        const info = await t.json<WorkerInfo>("GET", "/v1/worker", undefined, undefined, {}, this.probeMs);
        return [stateOf("", t.where, info)];
      } catch (e) {
        return [{ name: "", url: t.where, up: false, error: e instanceof StationError && e.status !== 0 ? e.message : reasonOf(e) }];
      }
    }
    return Promise.all(
      routes.map(async (r): Promise<WorkerState> => {
        try {
          const info = await r.transport.json<WorkerInfo>("GET", "/v1/worker", undefined, undefined, {}, this.probeMs);
          return stateOf(r.config.name, r.config.url, info);
        } catch (e) {
          const error = e instanceof StationError && e.status !== 0 ? `HTTP ${e.status}: ${e.message}` : reasonOf(e);
          return { name: r.config.name, url: r.config.url, up: false, error };
        }
      }),
    );
  }

  /** POST to a creating endpoint with an Idempotency-Key, retried with it (CreateOptions). */
  private async create<T>(path: string, request: unknown, options: CreateOptions): Promise<T> {
    const key = options.idempotencyKey ?? randomUUID();
    checkIdempotencyKey(key);
    const retries = options.retries ?? 2;
    if (!Number.isInteger(retries) || retries < 0 || retries > 10)
      throw new TypeError(`retries must be an integer from 0 to 10, not ${JSON.stringify(retries)}`);
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.t.json<T>("POST", path, request, undefined, { "Idempotency-Key": key });
      } catch (e) {
        const again = e instanceof StationError && (e.status === 0 || e.code === "in_progress");
        if (!again || attempt >= retries) throw e;
        const delay = e.code === "in_progress" ? 1000 : CREATE_RETRY_DELAY_MS * 2 ** attempt;
        await new Promise((r) => setTimeout(r, delay));
      }
    }
  }

  /** `unix:/path/station.sock` or the URL this client talks to. */
  get endpoint(): string {
    return this.t.where;
  }

  // -- worker -----------------------------------------------------------------------------

  /** `GET /v1/ready`: the report, also when the worker is not ready (HTTP 503). */
  ready(): Promise<ReadyReport> {
    return this.t.json<ReadyReport>("GET", "/v1/ready", undefined, (s) => s === 200 || s === 503);
  }

  worker(): Promise<WorkerInfo> {
    return this.t.json("GET", "/v1/worker");
  }

  /**
   * The worker's totals over time (a tenant's token: its own workspaces' sum), as
   * `workspaceUsage()`. With several workers, `worker` names which (as `on(worker)`).
   */
  workerUsage(options: UsageOptions & { worker?: string } = {}): Promise<UsageHistory> {
    const c = options.worker !== undefined ? this.on(options.worker) : this;
    return c.t.json("GET", `/v1/worker/usage${usageQuery(options)}`);
  }

  // -- workspaces -------------------------------------------------------------------------

  /**
   * Every workspace. With several workers: of all workers, asked at once, in the configured
   * order; the workers that did not answer (or answered an error) are in `unreachable`, and
   * when none answered this throws (a WorkerUnavailableError naming the first).
   */
  async workspaces(filter: WorkspaceFilter = {}): Promise<WorkspaceList> {
    return this.listAll<Workspace>(`/v1/workspaces${workspaceQuery(filter)}`, "workspaces");
  }

  /** GET path (a list under key) of every worker at once, as `workspaces()` describes. */
  private async listAll<T>(path: string, key: string): Promise<T[] & { unreachable: UnreachableWorker[] }> {
    const what = `GET ${path.replace(/\?.*/, "")}`;
    if (!this.router) {
      const doc = await this.t.json<Record<string, T[]>>("GET", path);
      if (!Array.isArray(doc?.[key])) throw new StationError(200, "protocol_error", `${what}: an answer without "${key}"`);
      return Object.assign(doc[key]!, { unreachable: [] });
    }
    const routes = [...this.router.routes.values()];
    const answers = await Promise.all(
      routes.map(async (r) => {
        try {
          const doc = await r.transport.json<Record<string, T[]>>("GET", path, undefined, undefined, {}, this.probeMs);
          if (!Array.isArray(doc?.[key])) throw new StationError(200, "protocol_error", `${what}: an answer without "${key}"`);
          return { r, list: doc[key]! };
        } catch (e) {
          return { r, error: unavailable(r, e) };
        }
      }),
    );
    const list: T[] = [];
    const unreachable: UnreachableWorker[] = [];
    for (const a of answers) {
      if (a.list) list.push(...a.list);
      else {
        const e = a.error;
        const why = e instanceof WorkerUnavailableError ? reasonOf(e.cause) : e instanceof Error ? e.message : String(e);
        unreachable.push({ worker: a.r.config.name, url: a.r.config.url, error: why });
      }
    }
    if (unreachable.length === routes.length) {
      const first = answers[0]!;
      if (first.error instanceof WorkerUnavailableError) {
        const all = unreachable.map((u) => `${u.worker} (${u.url}): ${u.error}`).join("; ");
        throw new WorkerUnavailableError(first.r.config.name, first.r.config.url, unreachable[0]!.error, { message: `no worker answered: ${all}` });
      }
      throw first.error;
    }
    return Object.assign(list, { unreachable });
  }

  /**
   * A workspace by id or by name. With several workers a name is looked up on every worker;
   * on several: a StationError (code `invalid_argument`) naming each worker and id.
   */
  workspace(id: string): Promise<Workspace> {
    return this.t.json("GET", `/v1/workspaces/${seg(id)}`);
  }

  /**
   * Renames and relabels a workspace (by id or name): a JSON merge patch, `name: null` removes
   * the name, in `labels` a string sets the key, `null` removes it, the others stay.
   */
  updateWorkspace(id: string, request: UpdateWorkspaceRequest): Promise<Workspace> {
    if (request.name === undefined && request.labels === undefined)
      throw new TypeError("updateWorkspace: nothing to update: give name or labels");
    return this.t.json("PATCH", `/v1/workspaces/${seg(id)}`, request);
  }

  /**
   * Creates a workspace. With several workers: on `options.worker`, else where the placement
   * rule puts it (docs/operations.md, "Placement": not on a worker that is down, full or private
   * to another tenant; the caller's own private worker first, then the most free). None left:
   * a 503 StationError naming why each was skipped (none answering: a WorkerUnavailableError).
   */
  async createWorkspace(request: CreateWorkspaceRequest = {}, options: CreateWorkspaceOptions = {}): Promise<Workspace> {
    const { worker, ...create } = options;
    checkCreateRequest(request);
    if (!this.router) {
      if (worker !== undefined) throw new TypeError(`worker ${JSON.stringify(worker)}: this client has one controller, not several workers`);
      return this.create("/v1/workspaces", request, create);
    }
    let name = request.snapshot !== undefined ? createWorkerOf(request.snapshot, worker) : worker;
    if (name === undefined) {
      const states = await this.workers();
      const { worker: best, why } = placeWorker(states);
      if (!best && !states.some((s) => s.up)) {
        const first = states[0]!;
        const all = states.map((s) => `${s.name} (${s.url}): ${s.error}`).join("; ");
        throw new WorkerUnavailableError(first.name, first.url, first.error ?? "", { message: `no worker answered: ${all}` });
      }
      if (!best) throw new StationError(503, "unavailable", `no worker can take this workspace: ${why}`);
      name = best.name;
    }
    return this.on(name).create<Workspace>("/v1/workspaces", request, create).catch((e) => {
      throw unavailable(this.router!.route(name), e);
    });
  }

  deleteWorkspace(id: string): Promise<DeletedWorkspace> {
    return this.t.json("DELETE", `/v1/workspaces/${seg(id)}`);
  }

  restartWorkspace(id: string): Promise<Workspace> {
    return this.t.json("POST", `/v1/workspaces/${seg(id)}/restart`);
  }

  // -- pause, snapshots, fork (docs/api.md, "Pause and resume", "Snapshots and fork") -------

  /**
   * Freezes every process of the workspace; its run timeouts and idle time stop (state
   * `paused`, `pausedAt` set). Files are still read; a command, terminal, file write or service
   * start rejects with a PausedError (409 `paused`) until `resumeWorkspace`, unless it was
   * created with `autoResume`. Pausing a paused workspace changes nothing.
   */
  pauseWorkspace(id: string): Promise<Workspace> {
    return this.t.json("POST", `/v1/workspaces/${seg(id)}/pause`);
  }

  /** Thaws a paused workspace: its processes and clocks go on (state `ready`). */
  resumeWorkspace(id: string): Promise<Workspace> {
    return this.t.json("POST", `/v1/workspaces/${seg(id)}/resume`);
  }

  /**
   * Keeps HOME and the root filesystem's changes (a host workspace: its directory) as a
   * snapshot, the workspace paused while they are read. `memory`: the processes too (501
   * naming what the worker lacks where it cannot). `createWorkspace({snapshot: s.id})` starts
   * a workspace from it.
   */
  createSnapshot(workspaceId: string, request: SnapshotRequest = {}): Promise<Snapshot> {
    checkSnapshotRequest(request);
    return this.t.json("POST", `/v1/workspaces/${seg(workspaceId)}/snapshots`, request);
  }

  /**
   * The snapshots, newest first. With several workers: of all workers, asked at once; the
   * workers that did not answer are in `unreachable` (none answering: this throws).
   */
  async snapshots(): Promise<SnapshotList> {
    const list = await this.listAll<Snapshot>("/v1/snapshots", "snapshots");
    if (this.router) list.sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0));
    return list;
  }

  /**
   * The client of the worker a snapshot id names (`s-w2-…`): this one with one controller. A
   * TypeError, without a request, for what has no snapshot id's shape, and with several
   * workers for an id of the older shape `s-…`, which names none (use `client.on(name)`).
   */
  private ofSnapshot(id: string): StationClient {
    const name = snapshotWorkerOf(id);
    if (!this.router) return this;
    if (name === null)
      throw new TypeError(`snapshot ${id} names no worker (it was taken before snapshot ids carried one): ask the worker that keeps it, client.on(name)`);
    this.router.route(name, `snapshot ${id}`);
    return this.on(name);
  }

  /** One snapshot; 404 for an unknown id (or another tenant's). */
  snapshot(id: string): Promise<Snapshot> {
    const c = this.ofSnapshot(id);
    return c.t.json("GET", `/v1/snapshots/${seg(id)}`);
  }

  /** Deletes the snapshot and its image; 409 while a workspace runs on it. */
  async deleteSnapshot(id: string): Promise<void> {
    const c = this.ofSnapshot(id);
    await c.t.json("DELETE", `/v1/snapshots/${seg(id)}`);
  }

  /**
   * One snapshot of the workspace, then `count` (1-100) workspaces made from it, each
   * independent from then on: `{workspaces, snapshot, pausedMs}`.
   */
  async forkWorkspace(id: string, count = 1): Promise<ForkResult> {
    if (!Number.isInteger(count) || count < 1 || count > FORK_MAX)
      throw new TypeError(`count must be an integer from 1 to ${FORK_MAX}, not ${JSON.stringify(count)}`);
    const doc = await this.t.json<ForkResult>("POST", `/v1/workspaces/${seg(id)}/fork`, { count });
    if (!Array.isArray(doc?.workspaces)) throw new StationError(201, "protocol_error", `POST fork: an answer without "workspaces"`);
    return doc;
  }

  /** Mode, address, egress policy and counters. */
  workspaceNetwork(id: string): Promise<WorkspaceNetwork> {
    return this.t.json("GET", `/v1/workspaces/${seg(id)}/network`);
  }

  /** Replaces a restricted workspace's egress policy (409 for another mode). */
  setWorkspaceNetwork(id: string, egress: EgressPolicy): Promise<WorkspaceNetwork> {
    return this.t.json("PUT", `/v1/workspaces/${seg(id)}/network`, { egress });
  }

  /**
   * The workspace's CPU, memory, pids and network over time (docs/api.md, "Usage history"):
   * `samples` oldest first, one per `step` that had samples. A malformed since or step is a
   * StationError 400 naming it.
   */
  workspaceUsage(id: string, options: UsageOptions = {}): Promise<UsageHistory> {
    return this.t.json("GET", `/v1/workspaces/${seg(id)}/usage${usageQuery(options)}`);
  }

  // -- commands ---------------------------------------------------------------------------

  /** Starts a command. With `waitMs` the answer waits until the run is terminal or waitMs passed. */
  startCommand(
    workspaceId: string,
    request: StartCommandRequest,
    options: { waitMs?: number } & CreateOptions = {},
  ): Promise<Run> {
    const { waitMs, ...create } = options;
    return this.create(`/v1/workspaces/${seg(workspaceId)}/commands${query({ waitMs })}`, request, create);
  }

  /** Newest first, without output fields. */
  async commands(workspaceId: string, options: { limit?: number } = {}): Promise<RunSummary[]> {
    const path = `/v1/workspaces/${seg(workspaceId)}/commands${query(options)}`;
    return (await this.t.json<{ commands: RunSummary[] }>("GET", path)).commands;
  }

  /** A run; with `waitMs`, long-polls until it is terminal or waitMs passed (server cap 60 s). */
  command(workspaceId: string, runId: string, options: { waitMs?: number } = {}): Promise<Run> {
    return this.t.json("GET", `/v1/workspaces/${seg(workspaceId)}/commands/${seg(runId)}${query(options)}`);
  }

  /**
   * Kills the run's process tree; resolves with the run (`cancelled`); 409 when already finished.
   * Its own deadline, whatever `timeoutMs`: the 10 s the server may hold it plus 5 s.
   */
  cancelCommand(workspaceId: string, runId: string): Promise<Run> {
    const ms = CANCEL_HOLD_MS + CANCEL_TIMEOUT_MS;
    return this.t.json("POST", `/v1/workspaces/${seg(workspaceId)}/commands/${seg(runId)}/cancel`, undefined, undefined, {}, ms);
  }

  /**
   * Follows a run's output (over WebSocket) until the run ends; resolves with the final run as
   * `command()` returns it, output fields included (fetched once the stream ended: the stream's
   * `end` carries the run without them). A finished run replays its kept head and tail first.
   */
  async followOutput(workspaceId: string, runId: string, handlers: OutputHandlers = {}): Promise<Run> {
    const path = `/v1/workspaces/${seg(workspaceId)}/commands/${seg(runId)}/output`;
    await this.stream<Run>(path, handlers, "run");
    return this.command(workspaceId, runId);
  }

  // -- code contexts ----------------------------------------------------------------------

  /** A workspace's code contexts: `contexts(id).create("python")`, then `execute(code)`. */
  contexts(workspaceId: string): Contexts {
    return new Contexts(this, workspaceId);
  }

  /** POST …/contexts: resolves once the context's interpreter answers (up to 30 s). */
  createContext(workspaceId: string, request: CreateContextRequest): Promise<ContextInfo> {
    return this.t.json("POST", `/v1/workspaces/${seg(workspaceId)}/contexts`, request, undefined, {}, this.timeoutMs + 35_000);
  }

  async listContexts(workspaceId: string): Promise<ContextInfo[]> {
    return (await this.t.json<{ contexts: ContextInfo[] }>("GET", `/v1/workspaces/${seg(workspaceId)}/contexts`)).contexts;
  }

  context(workspaceId: string, contextId: string): Promise<ContextInfo> {
    return this.t.json("GET", `/v1/workspaces/${seg(workspaceId)}/contexts/${seg(contextId)}`);
  }

  async deleteContext(workspaceId: string, contextId: string): Promise<void> {
    await this.t.json("DELETE", `/v1/workspaces/${seg(workspaceId)}/contexts/${seg(contextId)}`);
  }

  restartContext(workspaceId: string, contextId: string): Promise<ContextInfo> {
    return this.t.json("POST", `/v1/workspaces/${seg(workspaceId)}/contexts/${seg(contextId)}/restart`, undefined, undefined, {}, this.timeoutMs + 35_000);
  }

  interruptContext(workspaceId: string, contextId: string): Promise<ExecutionInfo> {
    return this.t.json("POST", `/v1/workspaces/${seg(workspaceId)}/contexts/${seg(contextId)}/interrupt`, undefined, undefined, {}, this.timeoutMs + 10_000);
  }

  /** POST …/execute; with `waitMs` the answer waits for the cell to end (server cap 60 s). */
  executeCell(workspaceId: string, contextId: string, request: { code: string; timeoutMs?: number }, options: { waitMs?: number } = {}): Promise<ExecutionInfo> {
    const path = `/v1/workspaces/${seg(workspaceId)}/contexts/${seg(contextId)}/execute${query(options)}`;
    return this.t.json("POST", path, request);
  }

  execution(workspaceId: string, contextId: string, executionId: string, options: { waitMs?: number } = {}): Promise<ExecutionInfo> {
    const path = `/v1/workspaces/${seg(workspaceId)}/contexts/${seg(contextId)}/executions/${seg(executionId)}${query(options)}`;
    return this.t.json("GET", path);
  }

  async executions(workspaceId: string, contextId: string): Promise<ExecutionInfo[]> {
    const path = `/v1/workspaces/${seg(workspaceId)}/contexts/${seg(contextId)}/executions`;
    return (await this.t.json<{ executions: ExecutionInfo[] }>("GET", path)).executions;
  }

  /** Follows a cell's stdout and stderr (its run's output stream) until the cell's run ends. */
  async followExecution(workspaceId: string, contextId: string, executionId: string, handlers: OutputHandlers = {}): Promise<void> {
    const path = `/v1/workspaces/${seg(workspaceId)}/contexts/${seg(contextId)}/executions/${seg(executionId)}/output`;
    await this.stream<Run>(path, handlers, "run");
  }

  // -- images -----------------------------------------------------------------------------

  async images(): Promise<Image[]> {
    return (await this.t.json<{ images: Image[] }>("GET", "/v1/images")).images;
  }

  image(digest: string): Promise<Image> {
    return this.t.json("GET", `/v1/images/${seg(digest)}`);
  }

  /** Imports an OCI image layout (directory or tar) at an absolute path on the worker. */
  importImage(request: ImportImageRequest): Promise<Image> {
    return this.t.json("POST", "/v1/images", request);
  }

  /** Pulls `registry/name@sha256:…` (never by tag). */
  pullImage(request: PullImageRequest): Promise<Image> {
    return this.t.json("POST", "/v1/images", request);
  }

  deleteImage(digest: string): Promise<DeletedImage> {
    return this.t.json("DELETE", `/v1/images/${seg(digest)}`);
  }

  // -- services (named by `name` in paths) --------------------------------------------------

  /** Attempts in the list carry no output. */
  async services(workspaceId: string): Promise<Service[]> {
    const path = `/v1/workspaces/${seg(workspaceId)}/services`;
    return (await this.t.json<{ services: Service[] }>("GET", path)).services;
  }

  service(workspaceId: string, name: string): Promise<Service> {
    return this.t.json("GET", `/v1/workspaces/${seg(workspaceId)}/services/${seg(name)}`);
  }

  startService(workspaceId: string, request: StartServiceRequest, options: CreateOptions = {}): Promise<Service> {
    return this.create(`/v1/workspaces/${seg(workspaceId)}/services`, request, options);
  }

  /**
   * Resolves once the service is stopped: state `stopped`, the stopped attempt in `attempts`
   * (at most its `stopTimeoutMs` + 5 s; past that, as it is then, `stopping: true`).
   */
  stopService(workspaceId: string, name: string): Promise<Service> {
    return this.t.json("POST", `/v1/workspaces/${seg(workspaceId)}/services/${seg(name)}/stop`);
  }

  restartService(workspaceId: string, name: string): Promise<Service> {
    return this.t.json("POST", `/v1/workspaces/${seg(workspaceId)}/services/${seg(name)}/restart`);
  }

  deleteService(workspaceId: string, name: string): Promise<DeletedService> {
    return this.t.json("DELETE", `/v1/workspaces/${seg(workspaceId)}/services/${seg(name)}`);
  }

  /**
   * A service's output (over WebSocket). With `follow`, the current attempt's output live
   * until it ends; without, the newest finished attempt's stored output. Resolves with the
   * service as `service()` returns it (fetched once the stream ended: the stream's `end`
   * carries it without its attempts' output).
   */
  async serviceLogs(workspaceId: string, name: string, options: OutputHandlers & { follow?: boolean } = {}): Promise<Service> {
    const path = `/v1/workspaces/${seg(workspaceId)}/services/${seg(name)}/logs${query({ follow: options.follow })}`;
    await this.stream<Service>(path, options, "service");
    return this.service(workspaceId, name);
  }

  // -- terminals --------------------------------------------------------------------------

  async terminals(workspaceId: string): Promise<Terminal[]> {
    const path = `/v1/workspaces/${seg(workspaceId)}/terminals`;
    return (await this.t.json<{ terminals: Terminal[] }>("GET", path)).terminals;
  }

  terminal(workspaceId: string, terminalId: string): Promise<Terminal> {
    return this.t.json("GET", `/v1/workspaces/${seg(workspaceId)}/terminals/${seg(terminalId)}`);
  }

  createTerminal(workspaceId: string, request: CreateTerminalRequest, options: CreateOptions = {}): Promise<Terminal> {
    return this.create(`/v1/workspaces/${seg(workspaceId)}/terminals`, request, options);
  }

  resizeTerminal(workspaceId: string, terminalId: string, size: { cols: number; rows: number }): Promise<Terminal> {
    return this.t.json("POST", `/v1/workspaces/${seg(workspaceId)}/terminals/${seg(terminalId)}/resize`, size);
  }

  /** Force-close: kills the terminal's process tree; resolves once its end is recorded. */
  closeTerminal(workspaceId: string, terminalId: string): Promise<Terminal> {
    return this.t.json("DELETE", `/v1/workspaces/${seg(workspaceId)}/terminals/${seg(terminalId)}`);
  }

  /** Attaches to a terminal over WebSocket (the bearer token goes in the Authorization header). */
  async attachTerminal(workspaceId: string, terminalId: string, handlers: AttachHandlers = {}): Promise<TerminalSession> {
    const q = query({ readOnly: handlers.readOnly });
    const path = `/v1/workspaces/${seg(workspaceId)}/terminals/${seg(terminalId)}/attach${q}`;
    const up = await this.t.upgrade(path, ["station-sandbox"]);
    let exit: TerminalExit | null = null;
    let resolveClosed!: (e: TerminalExit | null) => void;
    const closed = new Promise<TerminalExit | null>((r) => (resolveClosed = r));
    const ws = new WsConnection(up.socket, up.head, {
      onBinary: (d) => handlers.onData?.(d),
      onText: (text) => {
        let m: { type?: string; bytes?: number } & Partial<TerminalExit>;
        try {
          m = JSON.parse(text);
        } catch {
          return;
        }
        if (m.type === "gap" && typeof m.bytes === "number") handlers.onGap?.(m.bytes);
        else if (m.type === "exit") {
          exit = { exitCode: m.exitCode ?? null, signal: m.signal ?? null, state: m.state ?? "exited" };
          handlers.onExit?.(exit);
        }
      },
      onClose: () => resolveClosed(exit),
    });
    return {
      write: (data) => ws.sendBinary(data),
      resize: (cols, rows) => ws.sendText(JSON.stringify({ type: "resize", cols, rows })),
      close: () => ws.close(1000),
      closed,
    };
  }

  // -- files (performed by the workspace's agent, inside the sandbox) -----------------------

  /** Does not follow a final symlink. */
  statFile(workspaceId: string, path: string): Promise<FileEntry> {
    return this.t.json("GET", `/v1/workspaces/${seg(workspaceId)}/files/stat${query({ path: filePath(path) })}`);
  }

  /** A directory's entries, sorted by name (at most 10,000; `truncated` when more). */
  listFiles(workspaceId: string, path: string): Promise<FileList> {
    return this.t.json("GET", `/v1/workspaces/${seg(workspaceId)}/files/list${query({ path: filePath(path) })}`);
  }

  /**
   * A file (or a range of it) as one Buffer, with its etag. `maxBytes`: 413 for a larger file
   * or range (checked here too, should a server send more).
   */
  async readFile(workspaceId: string, path: string, options: ReadFileOptions = {}): Promise<{ data: Buffer; etag: string | null }> {
    const res = await this.openFile(workspaceId, path, options);
    const data = await readAll(res, options.maxBytes, `GET ${path}`);
    return { data, etag: headerValue(res.headers.etag) };
  }

  /** A file's bytes as a stream, never held whole in memory. Errors (404, 416, …) reject before any byte. */
  async downloadFile(workspaceId: string, path: string, options: ReadFileOptions = {}): Promise<Readable> {
    return (await this.openFile(workspaceId, path, options)).body;
  }

  private openFile(workspaceId: string, path: string, options: ReadFileOptions): Promise<RawResponse> {
    const q = query({ path: filePath(path), maxBytes: options.maxBytes });
    return this.t.raw("GET", `/v1/workspaces/${seg(workspaceId)}/files${q}`, {
      headers: rangeHeader(options.range),
      signal: options.signal,
    });
  }

  /**
   * Replaces (or creates) a file atomically with `data`: bytes, text (UTF-8) or an async
   * iterable of chunks (a node Readable, a web ReadableStream) streamed through, never held
   * whole. Resolves with the new entry.
   */
  async writeFile(
    workspaceId: string,
    path: string,
    data: string | Uint8Array | AsyncIterable<Uint8Array | string>,
    options: WriteFileOptions & { size?: number; signal?: AbortSignal } = {},
  ): Promise<FileEntry> {
    const q = query({
      path: filePath(path),
      mode: options.mode === undefined ? undefined : octalMode(options.mode),
      parents: options.parents,
      exclusive: options.exclusive,
    });
    const headers: Record<string, string> = { "Content-Type": "application/octet-stream", Accept: "application/json" };
    if (options.ifMatch !== undefined) headers["If-Match"] = options.ifMatch;
    const body = typeof data === "string" ? Buffer.from(data, "utf8") : data;
    const res = await this.t.raw("PUT", `/v1/workspaces/${seg(workspaceId)}/files${q}`, {
      headers,
      body,
      size: options.size,
      signal: options.signal,
    });
    const text = (await readAll(res, undefined, `PUT ${path}`)).toString("utf8");
    try {
      return JSON.parse(text) as FileEntry;
    } catch {
      throw new StationError(res.status, "protocol_error", `PUT ${path}: answer ${res.status} is not JSON: ${text.slice(0, 200)}`);
    }
  }

  /** 201 with the new directory's entry. */
  makeDirectory(workspaceId: string, path: string, options: { parents?: boolean; mode?: string | number } = {}): Promise<FileEntry> {
    const body: Record<string, unknown> = { path: filePath(path), parents: options.parents ?? false };
    if (options.mode !== undefined) body.mode = octalMode(options.mode);
    return this.t.json("POST", `/v1/workspaces/${seg(workspaceId)}/files/mkdir`, body);
  }

  /** The entry at `to`. `overwrite: false`: 409 when `to` exists. */
  renameFile(workspaceId: string, from: string, to: string, options: { overwrite?: boolean } = {}): Promise<FileEntry> {
    const body = { from: filePath(from), to: filePath(to), overwrite: options.overwrite ?? true };
    return this.t.json("POST", `/v1/workspaces/${seg(workspaceId)}/files/rename`, body);
  }

  /** A symlink is removed, never followed; a non-empty directory needs `recursive` (else 409). */
  deleteFile(workspaceId: string, path: string, options: { recursive?: boolean } = {}): Promise<DeletedFile> {
    const q = query({ path: filePath(path), recursive: options.recursive });
    return this.t.json("DELETE", `/v1/workspaces/${seg(workspaceId)}/files${q}`);
  }

  /**
   * Changes beneath a directory (server-sent events), as an async iterator: `ready` first,
   * then `created`, `modified`, `deleted`, `moved`, `overflow`. Ends when the directory is
   * deleted or the workspace stops; `break` or `signal` closes it.
   */
  async *watchFiles(
    workspaceId: string,
    path: string,
    options: { recursive?: boolean; signal?: AbortSignal } = {},
  ): AsyncGenerator<FileEvent, void, undefined> {
    const q = query({ path: filePath(path), recursive: options.recursive });
    for await (const e of this.t.eventStream(`/v1/workspaces/${seg(workspaceId)}/files/watch${q}`, options.signal)) {
      const d = JSON.parse(e.data) as FileEvent & { error?: { code?: string; message?: string; field?: string } };
      if (e.event === "error" && d.error) {
        const code = d.error.code ?? "internal";
        throw makeError(STATUS_OF_CODE[code] ?? 500, code, d.error.message ?? "watch failed", d.error.field);
      }
      yield d;
    }
  }

  // -- secrets (values are never answered) -------------------------------------------------

  /** Stores or replaces a secret; resolves with it, without its value. */
  setSecret(workspaceId: string, name: string, request: SetSecretRequest): Promise<Secret> {
    return this.t.json("PUT", `/v1/workspaces/${seg(workspaceId)}/secrets/${seg(name)}`, request);
  }

  async secrets(workspaceId: string): Promise<Secret[]> {
    return (await this.t.json<{ secrets: Secret[] }>("GET", `/v1/workspaces/${seg(workspaceId)}/secrets`)).secrets;
  }

  secret(workspaceId: string, name: string): Promise<Secret> {
    return this.t.json("GET", `/v1/workspaces/${seg(workspaceId)}/secrets/${seg(name)}`);
  }

  /** Revoked at once: the next credential request for it is refused. */
  deleteSecret(workspaceId: string, name: string): Promise<DeletedSecret> {
    return this.t.json("DELETE", `/v1/workspaces/${seg(workspaceId)}/secrets/${seg(name)}`);
  }

  // -- previews (docs/api.md, "Previews") ---------------------------------------------------

  /**
   * Gives a port inside the workspace (a server bound to 127.0.0.1 included) a URL of its own,
   * reached through the controller's preview listener. Token access unless `public`: the answer's
   * `token` (shown this once) and `openUrl` (the link a browser opens). 409 when the port is
   * exposed already, when the controller has no `--preview-listen`, or for a host workspace.
   */
  async exposePort(workspaceId: string, port: number, options: ExposePortOptions = {}): Promise<ExposedPort> {
    const body: Record<string, unknown> = { port: portNumber(port), access: options.public ? "public" : "token" };
    if (options.expiresInMs !== undefined) {
      const ms = options.expiresInMs;
      if (!Number.isInteger(ms) || ms < 1 || ms > PREVIEW_MAX_EXPIRES_MS) {
        throw new TypeError(`expiresInMs must be an integer from 1 to ${PREVIEW_MAX_EXPIRES_MS} (30 days), not ${JSON.stringify(ms)}`);
      }
      body.expiresInMs = ms;
    }
    const e = await this.t.json<ExposedPort>("POST", `/v1/workspaces/${seg(workspaceId)}/ports`, body);
    if (typeof e.token === "string" && e.openUrl === undefined) {
      e.openUrl = `${e.url}${query({ station_preview_token: e.token })}`;
    }
    return e;
  }

  /** The exposed ports (without tokens) and the TCP ports listening in the workspace. */
  ports(workspaceId: string): Promise<PortList> {
    return this.t.json("GET", `/v1/workspaces/${seg(workspaceId)}/ports`);
  }

  /** Ends the exposure of `port`: its URL answers 404 from now on. 404 when it is not exposed. */
  async revokePort(workspaceId: string, port: number): Promise<void> {
    await this.t.json<void>("DELETE", `/v1/workspaces/${seg(workspaceId)}/ports/${portNumber(port)}`);
  }

  // -- events -----------------------------------------------------------------------------

  /**
   * State changes of workspaces, runs, services and terminals as they happen (GET /v1/events
   * over WebSocket), as an async iterator: `for await (const ev of client.events({ workspace }))`.
   * A dropped connection is opened again after the last event yielded (`since`), so none is
   * seen twice; events the server no longer keeps come as one `gap`. After `retries`
   * connections in a row without a new event, the iteration throws. At most 1024 events are
   * buffered for a consumer that is slow; beyond that the socket is not read (the server then
   * drops what it cannot keep to a gap). Breaking out of the loop closes the connection.
   */
  async *events(options: EventsOptions = {}): AsyncGenerator<StationEvent, void, undefined> {
    const retries = options.retries ?? 5;
    let since = options.since;
    for (let failed = 0; ; ) {
      if (options.signal?.aborted) throw abortError();
      const path = `/v1/events${query({ workspace: options.workspace, types: options.types?.join(","), since })}`;
      const before = since;
      let closed = false;
      let failure: unknown;
      const queue: StationEvent[] = [];
      let wake: (() => void) | undefined;
      const poke = () => {
        const w = wake;
        wake = undefined;
        w?.();
      };
      let up: Awaited<ReturnType<typeof this.t.upgrade>> | undefined;
      try {
        up = await this.t.upgrade(path, ["station-sandbox"]);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code ?? "";
        if (!["ECONNRESET", "EPIPE", "ECONNREFUSED", "ENOENT"].includes(code)) throw e;
        closed = true;
      }
      let ws: WsConnection | undefined;
      const onAbort = () => {
        failure ??= abortError();
        up?.socket.destroy();
        poke();
      };
      options.signal?.addEventListener("abort", onAbort, { once: true });
      if (up) {
        const socket = up.socket;
        ws = new WsConnection(socket, up.head, {
          onText: (text) => {
            let ev: StationEvent;
            try {
              ev = JSON.parse(text);
            } catch {
              failure ??= new StationError(0, "protocol_error", `GET ${path}: an event that is not JSON`);
              socket.destroy();
              return;
            }
            if (typeof ev?.seq !== "number" || typeof ev.type !== "string") {
              failure ??= new StationError(0, "protocol_error", `GET ${path}: an event without seq and type`);
              socket.destroy();
              return;
            }
            queue.push(ev);
            if (queue.length >= 1024) socket.pause();
            poke();
          },
          onProtocolError: (why) => (failure ??= new StationError(0, "protocol_error", `GET ${path}: ${why}`)),
          onClose: (_code, _reason, error) => {
            if (error instanceof StationError) failure ??= error; // a deadline that passed
            closed = true;
            poke();
          },
        });
      }
      try {
        for (;;) {
          if (failure !== undefined) throw failure;
          const ev = queue.shift();
          if (ev) {
            if (up && queue.length < 512) up.socket.resume();
            if (since !== undefined && ev.seq <= since) continue; // seen already
            since = ev.seq;
            yield ev;
            continue;
          }
          if (closed) break;
          await new Promise<void>((r) => (wake = r));
        }
      } finally {
        options.signal?.removeEventListener("abort", onAbort);
        if (!closed) {
          ws?.close(1000);
          up?.socket.destroy();
        }
      }
      failed = since !== before ? 1 : failed + 1;
      if (failed > retries) throw new StationError(0, "protocol_error", `GET ${path}: the event stream dropped ${failed} times without a new event`);
      await new Promise((r) => setTimeout(r, Math.min(250 * 2 ** (failed - 1), 4000)));
    }
  }

  // -- shared -----------------------------------------------------------------------------

  /**
   * An output stream over WebSocket (docs/api.md, GET …/output and …/logs with Upgrade):
   * binary messages (1 byte stream, 8 bytes offset, the data), text `gap`, `end` (the object
   * under `endKey`) and `error` messages. Resolves with the end's object; a handler that throws,
   * a server that breaks the protocol or ends the stream without `end` rejects.
   */
  private async stream<End>(path: string, h: OutputHandlers, endKey: "run" | "service"): Promise<End> {
    const pos = { stdout: h.offset?.stdout ?? 0, stderr: h.offset?.stderr ?? 0 };
    const retries = h.retries ?? 3;
    for (let failed = 0; ; ) {
      const before = pos.stdout + pos.stderr;
      const sep = path.includes("?") ? "&" : "?";
      const resume = before > 0 ? `${path}${sep}stdoutOffset=${pos.stdout}&stderrOffset=${pos.stderr}` : path;
      try {
        return await this.streamOnce<End>(resume, path, h, endKey, pos);
      } catch (e) {
        const dropped =
          e instanceof StreamDropped ||
          (e instanceof Error && ["ECONNRESET", "EPIPE", "ECONNREFUSED"].includes((e as NodeJS.ErrnoException).code ?? ""));
        if (!dropped || h.signal?.aborted) throw e instanceof StreamDropped ? new StationError(0, "protocol_error", e.message) : e;
        failed = pos.stdout + pos.stderr > before ? 1 : failed + 1;
        if (failed > retries) throw e instanceof StreamDropped ? new StationError(0, "protocol_error", e.message) : e;
        await new Promise((r) => setTimeout(r, 100 * failed));
      }
    }
  }

  /** One connection of stream(); pos: per stream, the offset after what was delivered. */
  private async streamOnce<End>(
    url: string,
    path: string,
    h: OutputHandlers,
    endKey: "run" | "service",
    pos: Record<StreamName, number>,
  ): Promise<End> {
    if (h.signal?.aborted) throw abortError();
    const up = await this.t.upgrade(url, ["station-sandbox"]);
    if (h.signal?.aborted) {
      up.socket.destroy();
      throw abortError();
    }
    return new Promise<End>((resolve, reject) => {
      let end: End | undefined;
      let failure: unknown;
      const protocolError = (why: string) =>
        new StationError(0, "protocol_error", `GET ${path}: bad output stream: ${why}`);
      const stop = (err: unknown) => {
        failure ??= err;
        ws.close(1000);
        up.socket.destroy();
      };
      const onAbort = () => stop(abortError());
      const onBinary = (d: Buffer) => {
        if (d.length < 9 || (d[0] !== 1 && d[0] !== 2)) throw protocolError("a binary message without its 9-byte prefix");
        const stream = d[0] === 1 ? "stdout" : "stderr";
        let offset = Number(d.readBigUInt64BE(1));
        let data = d.subarray(9);
        if (offset + data.length <= pos[stream]) return; // replayed after a reconnect
        if (offset < pos[stream]) {
          data = data.subarray(pos[stream] - offset);
          offset = pos[stream];
        }
        if (offset > pos[stream]) h.onGap?.({ stream, offset: pos[stream], bytes: offset - pos[stream] });
        pos[stream] = offset + data.length;
        h.onOutput?.({ stream, offset, data });
      };
      const onText = (text: string) => {
        let m: { type?: string; stream?: StreamName; offset?: number; bytes?: number } & Record<string, unknown>;
        try {
          m = JSON.parse(text);
        } catch {
          throw protocolError("a text message that is not JSON");
        }
        if (m.type === "gap") {
          if ((m.stream !== "stdout" && m.stream !== "stderr") || typeof m.offset !== "number" || typeof m.bytes !== "number")
            throw protocolError("a gap without stream, offset and bytes");
          const from = Math.max(m.offset, pos[m.stream]);
          const to = m.offset + m.bytes;
          if (to > from) h.onGap?.({ stream: m.stream, offset: from, bytes: to - from });
          pos[m.stream] = Math.max(pos[m.stream], to);
        } else if (m.type === "end") {
          if (typeof m[endKey] !== "object" || m[endKey] === null) throw protocolError(`an end without "${endKey}"`);
          end = m[endKey] as End;
        } else if (m.type === "error") {
          const e = m.error as { code?: string; message?: string; field?: string } | undefined;
          const code = e?.code ?? "internal";
          throw makeError(STATUS_OF_CODE[code] ?? 500, code, e?.message ?? "stream error", e?.field);
        }
        // other types are for newer clients
      };
      const guard =
        <T>(fn: (x: T) => void) =>
        (x: T) => {
          if (failure !== undefined || end !== undefined) return;
          try {
            fn(x);
          } catch (e) {
            stop(e);
          }
        };
      const ws = new WsConnection(up.socket, up.head, {
        onBinary: guard(onBinary),
        onText: guard(onText),
        onProtocolError: (why) => (failure ??= protocolError(why)),
        onClose: (code, reason, error) => {
          h.signal?.removeEventListener("abort", onAbort);
          if (error instanceof StationError) failure ??= error; // a deadline that passed
          if (failure !== undefined) return reject(failure);
          if (end !== undefined) return resolve(end);
          const how = code === null || code === 1006 ? "" : ` (close ${code}${reason ? " " + reason : ""})`;
          reject(new StreamDropped(`GET ${path}: the stream ended without an end event${how}`));
        },
      });
      h.signal?.addEventListener("abort", onAbort, { once: true });
    });
  }
}
/** A worker's state from its `GET /v1/worker`; capacity from `limits` for a worker that reports none. */
function stateOf(name: string, url: string, info: WorkerInfo): WorkerState {
  let capacity: WorkerCapacity | undefined = (info as WorkerInfo & { capacity?: WorkerCapacity }).capacity;
  if (!capacity && typeof info.limits?.maxWorkspaces === "number" && typeof info.workspaces === "number") {
    const max = info.limits.maxWorkspaces;
    capacity = { workspaces: { max, used: info.workspaces, free: Math.max(0, max - info.workspaces) } };
  }
  if (name && info.name !== name)
    return { name, url, up: false, error: `answers as worker ${JSON.stringify(String(info.name))}, not ${name}` };
  return {
    name: info.name,
    url,
    up: true,
    version: info.version,
    ...(capacity ? { capacity } : {}),
    workspaces: info.workspaces,
    tenant: info.tenant ?? null,
    ...(info.caller ? { caller: info.caller } : {}),
  };
}
