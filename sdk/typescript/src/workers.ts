// Several workers behind one client: the worker list (an option, $STATION_WORKERS or a workers
// file, shared with the CLI: docs/operations.md), routing by a workspace id's worker prefix,
// and the error that names a worker that did not answer.

import { lstatSync, openSync, readSync, closeSync, fstatSync, constants as fsc } from "node:fs";
import { homedir } from "node:os";
import { dirname, isAbsolute, join } from "node:path";

import { StationError } from "./errors.js";

/** One worker: its name (the prefix of its workspace ids), where it listens, its token. */
export interface WorkerConfig {
  /** `[a-z0-9-]{1,32}`: the worker's `--worker` name. */
  name: string;
  /** `http://host:port`, `https://…` or `unix:/path/station.sock`. */
  url: string;
  /** Bearer token for this worker; default the client's `token`, else `$STATION_TOKEN`. */
  token?: string;
}

/** The `workers` option: `{ w1: "http://host1:8080", … }` or `[{ name, url, token }, …]`. */
export type WorkersOption = Record<string, string> | WorkerConfig[];

/** A worker that did not answer a list (its workspaces are missing from the list). */
export interface UnreachableWorker {
  worker: string;
  url: string;
  error: string;
}

/** What `workers()` reports per worker, in the configured order. */
export interface WorkerState {
  name: string;
  url: string;
  /** Whether `GET /v1/worker` answered 2xx within the client's timeout. */
  up: boolean;
  /** Why not, when not up. */
  error?: string;
  version?: string;
  /** As the worker reports it (`workspaces.max/used/free`, `memoryBytes.total/available`, `cpus`). */
  capacity?: WorkerCapacity;
  /** How many workspaces it holds. */
  workspaces?: number;
  /** The tenant of a private worker (`--tenant`); null or absent: shared. */
  tenant?: string | null;
  /** Who the client's token is there (`GET /v1/worker`'s `caller`). */
  caller?: { scope: string; tenant: string | null };
}

export interface WorkerCapacity {
  workspaces: { max: number; used: number; free: number };
  memoryBytes?: { total: number; available: number };
  cpus?: number;
}

/**
 * A worker of a client with several workers did not answer (refused, unreachable, no answer
 * within a deadline: README, "Deadlines"). `worker` and `url` name it; the other workers keep
 * working.
 */
export class WorkerUnavailableError extends StationError {
  readonly worker: string;
  readonly url: string;

  /** `code`: `connection_failed`, or `timeout` when it accepted the connection and gave no answer in time. */
  constructor(worker: string, url: string, reason: string, options?: { cause?: unknown; message?: string; code?: "connection_failed" | "timeout" }) {
    super(0, options?.code ?? "connection_failed", options?.message ?? `worker ${worker} (${url}) did not answer: ${reason}`, undefined, options);
    this.name = "WorkerUnavailableError";
    this.worker = worker;
    this.url = url;
  }
}

const NAME = /^[a-z0-9-]{1,32}$/;
/** A workers file larger than this is refused (as by the CLI). */
const MAX_FILE_BYTES = 256 * 1024;
const MAX_TOKEN_BYTES = 4096;

/**
 * The worker a snapshot id names: `s-w2-<26 of [a-z2-7]>` is on `w2`; `s-<26 …>`, as snapshots
 * were named before their ids carried a worker, names none (null). A TypeError naming anything
 * else.
 */
export function snapshotWorkerOf(id: string): string | null {
  const m = typeof id === "string" ? /^s-(?:([a-z0-9-]{1,32})-)?[a-z2-7]{26}$/.exec(id) : null;
  if (!m) throw new TypeError(`invalid snapshot id ${JSON.stringify(id)} (want s-WORKER-… as createSnapshot gives it)`);
  return m[1] ?? null;
}

/** The worker a workspace id names: everything before its last `-` (`w2-abc…` is on `w2`). */
export function workerOfId(id: string): string {
  const dash = id.lastIndexOf("-");
  return dash > 0 ? id.slice(0, dash) : id;
}

function checkWorker(w: WorkerConfig, where: string): WorkerConfig {
  if (typeof w?.name !== "string" || !NAME.test(w.name))
    throw new TypeError(`${where}: worker name ${JSON.stringify(w?.name)} is not 1-32 of [a-z0-9-]`);
  if (typeof w.url !== "string") throw new TypeError(`${where}: worker ${w.name} has no url`);
  if (w.url.startsWith("unix:")) {
    if (!w.url.slice(5).startsWith("/")) throw new TypeError(`${where}: worker ${w.name}: ${w.url} is not unix:/absolute/path`);
  } else {
    let u: URL;
    try {
      u = new URL(w.url);
    } catch {
      throw new TypeError(`${where}: worker ${w.name}: ${JSON.stringify(w.url)} is not a URL`);
    }
    if (u.protocol !== "http:" && u.protocol !== "https:")
      throw new TypeError(`${where}: worker ${w.name}: ${w.url}: only http:, https: and unix: are supported`);
  }
  if (w.token !== undefined && (typeof w.token !== "string" || /[\r\n\0]/.test(w.token)))
    throw new TypeError(`${where}: worker ${w.name}: the token must be a string without line breaks`);
  return { name: w.name, url: w.url, ...(w.token !== undefined ? { token: w.token } : {}) };
}

function checkList(list: WorkerConfig[], where: string): WorkerConfig[] {
  if (list.length === 0) throw new TypeError(`${where}: no workers`);
  const seen = new Set<string>();
  for (const w of list) {
    if (seen.has(w.name)) throw new TypeError(`${where}: worker ${w.name} is named twice`);
    seen.add(w.name);
  }
  return list;
}

/** `w1=http://host1:8080,w2=http://host2:8080`. */
export function parseWorkersEnv(value: string, where = "STATION_WORKERS"): WorkerConfig[] {
  const list = value
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "")
    .map((item) => {
      const eq = item.indexOf("=");
      if (eq < 0) throw new TypeError(`${where}: ${JSON.stringify(item)} is not NAME=URL`);
      return checkWorker({ name: item.slice(0, eq).trim(), url: item.slice(eq + 1).trim() }, where);
    });
  return checkList(list, where);
}

/** A small regular file, read whole (refused when larger than MAX_FILE_BYTES). */
function readSmallFile(path: string, what: string, max = MAX_FILE_BYTES): { text: string; mode: number; uid: number } {
  let fd: number;
  try {
    fd = openSync(path, fsc.O_RDONLY | fsc.O_NONBLOCK);
  } catch (e) {
    throw new TypeError(`${what} ${path}: ${(e as Error).message}`);
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new TypeError(`${what} ${path}: not a regular file`);
    if (st.size > max) throw new TypeError(`${what} ${path}: larger than ${max} bytes`);
    const buf = Buffer.alloc(max + 1);
    let n = 0;
    for (;;) {
      const got = readSync(fd, buf, n, buf.length - n, null);
      if (got === 0) break;
      n += got;
      if (n > max) throw new TypeError(`${what} ${path}: larger than ${max} bytes`);
    }
    return { text: buf.subarray(0, n).toString("utf8"), mode: st.mode, uid: st.uid };
  } finally {
    closeSync(fd);
  }
}

/**
 * A worker's token file (as the CLI reads it): a regular file owned by this user or root that
 * neither group nor others may read or write (mode 0600 or stricter), holding one token of
 * printable ASCII without spaces (a final newline is dropped).
 */
export function readTokenFile(path: string): string {
  const f = readSmallFile(path, "token file", MAX_TOKEN_BYTES);
  const uid = process.getuid?.();
  if (uid !== undefined && f.uid !== uid && f.uid !== 0)
    throw new TypeError(`token file ${path}: owned by uid ${f.uid}, not by you or root`);
  if ((f.mode & 0o077) !== 0)
    throw new TypeError(`token file ${path}: mode ${(f.mode & 0o7777).toString(8).padStart(4, "0")} lets group or others at it (chmod 600 ${path})`);
  const token = f.text.replace(/\r?\n$/, "");
  if (!/^[\x21-\x7e]+$/.test(token)) throw new TypeError(`token file ${path}: not one token of printable ASCII without spaces`);
  return token;
}

/** A workers file's TOKEN-FILE: `~/` is $HOME, a relative path is beside the workers file. */
function tokenPath(p: string, workersFile: string): string {
  if (p.startsWith("~/")) return join(homedir(), p.slice(2));
  return isAbsolute(p) ? p : join(dirname(workersFile), p);
}

/** A workers file: `NAME URL [TOKEN-FILE]` per line, `#` comments, blank lines ignored. */
export function readWorkersFile(path: string): WorkerConfig[] {
  const { text } = readSmallFile(path, "workers file");
  const list: WorkerConfig[] = [];
  text.split("\n").forEach((raw, i) => {
    const line = raw.replace(/#.*/, "").trim();
    if (!line) return;
    const where = `workers file ${path}, line ${i + 1}`;
    const parts = line.split(/\s+/);
    if (parts.length < 2 || parts.length > 3) throw new TypeError(`${where}: want NAME URL [TOKEN-FILE]`);
    const [name, url, tokenFile] = parts as [string, string, string | undefined];
    const w = checkWorker({ name, url }, where);
    if (tokenFile !== undefined) {
      try {
        w.token = readTokenFile(tokenPath(tokenFile, path));
      } catch (e) {
        throw new TypeError(`${where}: ${(e as Error).message}`);
      }
    }
    list.push(w);
  });
  return checkList(list, `workers file ${path}`);
}

/** The default workers file: `~/.config/station-sandbox/workers` (as for the CLI). */
export function defaultWorkersFile(): string {
  return join(process.env.HOME || homedir(), ".config", "station-sandbox", "workers");
}

function env(name: string): string | undefined {
  const v = process.env[name];
  return v ? v : undefined;
}

/** `STATION_WORKERS=discover:URL`: the workers that worker lists (StationClient.discover). */
export const DISCOVER = "discover:";

/**
 * The workers of a `GET /v1/workers` answer, each at its listed URL (the worker asked at `url`
 * when it lists itself without one), checked as any list is.
 */
export function workersOfList(doc: unknown, url: string): WorkerConfig[] {
  const where = `discover:${url}`;
  const items = (doc as { workers?: unknown })?.workers;
  if (!Array.isArray(items)) throw new TypeError(`${where}: GET /v1/workers answered without "workers"`);
  const list = items.map((w: { name?: unknown; url?: unknown; self?: unknown }) =>
    checkWorker({ name: w?.name as string, url: (w?.url ?? (w?.self === true ? url : undefined)) as string }, where),
  );
  return checkList(list, where);
}

/**
 * The worker list of a client, or undefined for one controller. The first that applies:
 * the `workers` option; none when `socketPath`, `url` or `rootDir` is given; `$STATION_WORKERS`;
 * `$STATION_WORKERS_FILE`; the default workers file when it exists and none of
 * `$STATION_URL`, `$STATION_SOCKET`, `$STATION_ROOT` is set.
 */
export function resolveWorkers(options: {
  workers?: WorkersOption;
  socketPath?: string;
  url?: string;
  rootDir?: string;
}): { list: WorkerConfig[]; source: string } | undefined {
  if (options.workers !== undefined) {
    if (options.socketPath !== undefined || options.url !== undefined || options.rootDir !== undefined)
      throw new TypeError("give either workers or socketPath/url/rootDir, not both");
    const w = options.workers;
    const list = Array.isArray(w)
      ? w.map((x) => checkWorker(x, "workers"))
      : Object.entries(w ?? {}).map(([name, url]) => checkWorker({ name, url }, "workers"));
    return { list: checkList(list, "workers"), source: "this client's workers" };
  }
  if (options.socketPath !== undefined || options.url !== undefined || options.rootDir !== undefined) return undefined;
  const fromEnv = env("STATION_WORKERS");
  if (fromEnv?.startsWith(DISCOVER))
    throw new TypeError(`STATION_WORKERS=${fromEnv}: discovery asks that worker first: make the client with await StationClient.discover()`);
  if (fromEnv) return { list: parseWorkersEnv(fromEnv), source: "STATION_WORKERS" };
  const file = env("STATION_WORKERS_FILE");
  if (file) return { list: readWorkersFile(file), source: `the workers file ${file}` };
  if (env("STATION_URL") || env("STATION_SOCKET") || env("STATION_ROOT")) return undefined;
  const def = defaultWorkersFile();
  try {
    lstatSync(def);
  } catch {
    return undefined;
  }
  return { list: readWorkersFile(def), source: `the workers file ${def}` };
}

/** Why a request got no answer, short: "connection refused", "no answer within 5000 ms". */
export function reasonOf(e: unknown): string {
  const cause = (e as { cause?: unknown })?.cause ?? e;
  const code = (cause as NodeJS.ErrnoException)?.code;
  const known: Record<string, string> = {
    ECONNREFUSED: "connection refused",
    ENOENT: "no such socket",
    ECONNRESET: "connection reset",
    EHOSTUNREACH: "host unreachable",
    ENETUNREACH: "network unreachable",
    ENOTFOUND: "host not found",
    EACCES: "permission denied",
  };
  if (code && known[code]) return known[code]!;
  return cause instanceof Error ? cause.message : String(cause);
}

function ownWorker(s: WorkerState): boolean {
  return !!s.tenant && s.tenant === s.caller?.tenant;
}

/**
 * Why a worker takes no create ("down", "private to another tenant", "full"), or undefined
 * (docs/operations.md, "Placement").
 */
export function skipReason(s: WorkerState): string | undefined {
  if (!s.up) return "down";
  if (s.tenant && s.caller?.scope !== "admin" && !ownWorker(s)) return "private to another tenant";
  if ((s.capacity?.workspaces?.free ?? -1) <= 0) return "full";
  return undefined;
}

/**
 * The placement rule: among the workers that answered, have room and are not private to another
 * tenant, the caller's own private worker first, then the most free workspace slots, then the
 * most available memory, then the first in order. `why` says why each worker was skipped when
 * none is left (`worker w1 (URL) did not answer: …; worker w2 is full`).
 */
export function placeWorker(states: WorkerState[]): { worker?: WorkerState; why: string } {
  let best: WorkerState | undefined;
  const free = (s: WorkerState) => s.capacity?.workspaces?.free ?? -1;
  const mem = (s: WorkerState) => s.capacity?.memoryBytes?.available ?? -1;
  const better = (a: WorkerState, b: WorkerState) =>
    ownWorker(a) !== ownWorker(b) ? ownWorker(a) : free(a) !== free(b) ? free(a) > free(b) : mem(a) > mem(b);
  for (const s of states) {
    if (skipReason(s) !== undefined) continue;
    if (!best || better(s, best)) best = s;
  }
  if (best) return { worker: best, why: "" };
  const why = states.map((s) => {
    const r = skipReason(s);
    return r === "down" ? `worker ${s.name} (${s.url}) did not answer: ${s.error}` : `worker ${s.name} is ${r}`;
  });
  return { why: why.join("; ") };
}

/** The worker the placement rule chooses (placeWorker), or undefined when none is left. */
export function mostFree(states: WorkerState[]): WorkerState | undefined {
  return placeWorker(states).worker;
}
