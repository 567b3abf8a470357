// HTTP/1.1 to the controller over a unix socket or TCP (http: or https:), with node's own
// http module: JSON requests, server-sent event streams and WebSocket upgrades.

import { createHash, randomBytes } from "node:crypto";
import * as http from "node:http";
import * as https from "node:https";
import type { Socket } from "node:net";
import type { Duplex, Readable } from "node:stream";
import { join } from "node:path";

import { StationError, makeError } from "./errors.js";
import { WorkerUnavailableError, type WorkersOption } from "./workers.js";

/** Where the controller is. The first of these that is set wins (as for the CLI):
 *  `socketPath`, `url`, `rootDir` (its `station.sock`), `$STATION_URL`, `$STATION_SOCKET`,
 *  `$STATION_ROOT/station.sock`, `/var/lib/station-sandbox/station.sock`. */
export interface ConnectionOptions {
  /** The controller's unix socket (operator access, no token). */
  socketPath?: string;
  /** A TCP listener, `http://127.0.0.1:8080` (a token is required there). */
  url?: string;
  /** The controller's metadata root: its socket is `<rootDir>/station.sock`. */
  rootDir?: string;
  /** Bearer token for a TCP listener; default `$STATION_TOKEN`. */
  token?: string;
  /**
   * Several workers, routed by each workspace id's worker prefix (see `StationClient`):
   * `{ w1: "http://host1:8080", … }` or `[{ name, url, token }, …]`. Without it (and without
   * socketPath, url, rootDir): `$STATION_WORKERS`, `$STATION_WORKERS_FILE`, the default workers
   * file `~/.config/station-sandbox/workers` (docs/operations.md).
   */
  workers?: WorkersOption;
  /**
   * The answer deadline in milliseconds (README, "Deadlines"); default `$STATION_TIMEOUT_MS`,
   * else 30000. A connection must be made within 10 s (or this, when shorter); an answer must
   * begin within this plus the `waitMs` the call asked the server to hold, and once begun never
   * stay silent this long (this plus 15 s in an event stream, plus 30 s on a WebSocket: the
   * server's heartbeat and ping intervals). A call that misses one fails with a StationError of
   * code `timeout` naming the controller, or the worker (a `WorkerUnavailableError`). With
   * several workers, `workers()` and `workspaces()` wait at most 10 s (or this) for each.
   */
  timeoutMs?: number;
}

/** The answer deadline when neither `timeoutMs` nor `$STATION_TIMEOUT_MS` gives one. */
export const DEFAULT_TIMEOUT_MS = 30000;
/** The longest a connection may take to be made (or the answer deadline, when shorter). */
export const CONNECT_TIMEOUT_MS = 10000;
/** The server sends an event stream a heartbeat comment after this long without an event. */
export const SSE_HEARTBEAT_MS = 15000;
/** The server pings a WebSocket after this long without input. */
export const WS_PING_MS = 30000;
/** The most the server holds a long-poll (`waitMs`). */
const MAX_WAIT_MS = 60000;

/** `timeoutMs`, else `$STATION_TIMEOUT_MS` (a positive integer), else DEFAULT_TIMEOUT_MS. */
export function resolveTimeout(timeoutMs: number | undefined): number {
  if (timeoutMs !== undefined) {
    if (!Number.isInteger(timeoutMs) || timeoutMs <= 0)
      throw new TypeError(`timeoutMs must be a positive integer, not ${JSON.stringify(timeoutMs)}`);
    return timeoutMs;
  }
  const v = process.env.STATION_TIMEOUT_MS;
  return v && /^[0-9]+$/.test(v) && Number(v) > 0 ? Number(v) : DEFAULT_TIMEOUT_MS;
}

/** What a request's path asks the server to hold it (`waitMs=N`, at most 60 s). */
function waitOf(path: string): number {
  const q = path.indexOf("?");
  if (q < 0) return 0;
  const w = Number(new URLSearchParams(path.slice(q + 1)).get("waitMs") ?? 0);
  return Number.isFinite(w) && w > 0 ? Math.min(w, MAX_WAIT_MS) : 0;
}

/** "2 s", "2.02 s". */
function seconds(ms: number): string {
  return `${ms / 1000} s`;
}

/**
 * One timer for the deadline of what a request waits for now: armed for ms, started over by
 * bump() (bytes moved), stopped by stop(). When it passes, miss(ms) runs, unless held() says
 * the wait is the reader's (bytes are buffered that it has not taken): then it starts over.
 */
class Deadline {
  private timer: NodeJS.Timeout | undefined;
  private ms = 0;

  constructor(
    private readonly miss: (ms: number) => void,
    private readonly held: () => boolean = () => false,
  ) {}

  arm(ms: number): void {
    this.ms = ms;
    this.bump();
  }

  bump(): void {
    if (this.ms <= 0) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.fire(), this.ms);
  }

  stop(): void {
    this.ms = 0;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private fire(): void {
    if (this.held()) return this.bump();
    const ms = this.ms;
    this.stop();
    this.miss(ms);
  }
}

export const DEFAULT_SOCKET = "/var/lib/station-sandbox/station.sock";

/** A JSON answer larger than this is refused rather than held in memory. */
export const MAX_JSON_BYTES = 64 * 1024 * 1024;

function env(name: string): string | undefined {
  const v = process.env[name];
  return v ? v : undefined;
}

export interface SseEvent {
  event: string;
  data: string;
}

/** An upgraded connection as node hands it over. */
export interface Upgraded {
  socket: Duplex;
  head: Buffer;
  protocol: string | undefined;
}

export class Transport {
  readonly socketPath: string | undefined;
  readonly url: URL | undefined;
  readonly token: string | undefined;
  /** The answer deadline (ConnectionOptions.timeoutMs). */
  readonly timeoutMs: number;
  /** The worker this transport reaches, for its errors: a client with several workers. */
  readonly worker: { name: string; url: string } | undefined;

  constructor(options: ConnectionOptions = {}, worker?: { name: string; url: string }) {
    let socketPath = options.socketPath;
    let url = options.url;
    if (socketPath === undefined && url === undefined) {
      if (options.rootDir !== undefined) socketPath = join(options.rootDir, "station.sock");
      else if (env("STATION_URL")) url = env("STATION_URL");
      else if (env("STATION_SOCKET")) socketPath = env("STATION_SOCKET");
      else if (env("STATION_ROOT")) socketPath = join(env("STATION_ROOT")!, "station.sock");
      else socketPath = DEFAULT_SOCKET;
    }
    if (socketPath !== undefined && url !== undefined)
      throw new TypeError("give either socketPath or url, not both");
    this.socketPath = socketPath;
    this.url = url === undefined ? undefined : new URL(url);
    if (this.url && this.url.protocol !== "http:" && this.url.protocol !== "https:")
      throw new TypeError(`url ${url}: only http: and https: are supported`);
    this.token = options.token || env("STATION_TOKEN");
    this.timeoutMs = resolveTimeout(options.timeoutMs);
    this.worker = worker;
  }

  /** The error of a deadline of ms that passed: names the worker, or the controller. */
  timedOut(ms: number): StationError {
    const reason = `no answer within ${seconds(ms)}`;
    const cause = Object.assign(new Error(reason), { code: "ETIMEDOUT" });
    if (this.worker)
      return new WorkerUnavailableError(this.worker.name, this.worker.url, reason, {
        cause,
        code: "timeout",
        message: `worker ${this.worker.name} (${this.worker.url}) did not answer within ${seconds(ms)}`,
      });
    return new StationError(0, "timeout", `${this.where} did not answer within ${seconds(ms)}`, undefined, { cause });
  }

  /**
   * Holds req to its deadlines: connected within CONNECT_TIMEOUT_MS (or t), then the answer's
   * head within headMs. The caller arms the deadline of the body once the head came. A miss
   * destroys req (or res) with the timed-out error and hands it to fail.
   */
  private deadlines(
    req: http.ClientRequest,
    t: number,
    headMs: number,
    fail: (e: StationError) => void,
    held?: () => boolean,
  ): Deadline & { res?: http.IncomingMessage } {
    const d: Deadline & { res?: http.IncomingMessage } = new Deadline((ms) => {
      const e = this.timedOut(ms);
      fail(e);
      if (d.res) d.res.destroy(e);
      req.destroy(e);
    }, held);
    d.arm(Math.min(CONNECT_TIMEOUT_MS, t));
    req.on("socket", (s: Socket) => {
      if (s.connecting) s.once("connect", () => d.arm(headMs));
      else d.arm(headMs);
    });
    req.on("close", () => {
      if (!d.res) d.stop();
    });
    return d;
  }

  /** `unix:/path` or the URL, for messages. */
  get where(): string {
    return this.socketPath !== undefined ? `unix:${this.socketPath}` : String(this.url);
  }

  private open(
    method: string,
    path: string,
    headers: Record<string, string>,
  ): http.ClientRequest {
    const h: Record<string, string> = { ...headers };
    if (this.token !== undefined) h["Authorization"] = `Bearer ${this.token}`;
    if (this.socketPath !== undefined) {
      return http.request({ socketPath: this.socketPath, method, path, headers: h, agent: false });
    }
    const u = this.url!;
    const base = u.pathname.replace(/\/+$/, "");
    const mod = u.protocol === "https:" ? https : http;
    return mod.request({
      protocol: u.protocol,
      hostname: u.hostname.replace(/^\[|\]$/g, ""),
      port: u.port || undefined,
      method,
      path: base + path,
      headers: h,
      agent: false,
    });
  }

  private connectionError(err: unknown): StationError {
    if (err instanceof StationError) return err; // a deadline that passed
    const msg = err instanceof Error ? err.message : String(err);
    return new StationError(0, "connection_failed", `cannot reach the controller at ${this.where}: ${msg}`, undefined, {
      cause: err,
    });
  }

  /** One JSON request; resolves to the parsed body of a 2xx answer, throws StationError else. */
  async json<T>(
    method: string,
    path: string,
    body?: unknown,
    accept?: (status: number) => boolean,
    extraHeaders: Record<string, string> = {},
    timeoutMs?: number,
  ): Promise<T> {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const headers: Record<string, string> = { Accept: "application/json", ...extraHeaders };
    if (payload) {
      headers["Content-Type"] = "application/json";
      headers["Content-Length"] = String(payload.length);
    }
    const t = timeoutMs ?? this.timeoutMs;
    const { status, text } = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = this.open(method, path, headers);
      req.on("error", (e) => reject(this.connectionError(e)));
      const d = this.deadlines(req, t, t + waitOf(path), reject);
      req.on("response", (res) => {
        const chunks: Buffer[] = [];
        let n = 0;
        d.res = res;
        d.arm(t);
        res.on("close", () => d.stop());
        res.on("data", (c: Buffer) => {
          d.bump();
          n += c.length;
          if (n > MAX_JSON_BYTES) {
            reject(new StationError(res.statusCode ?? 0, "protocol_error", `${method} ${path}: an answer over ${MAX_JSON_BYTES} bytes`));
            req.destroy();
            return;
          }
          chunks.push(c);
        });
        res.on("error", (e) => reject(this.connectionError(e)));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
      });
      req.end(payload);
    });
    const ok = accept ? accept(status) : status >= 200 && status < 300;
    if (!ok) throw errorFromBody(status, text, `${method} ${path}`);
    if (status === 204) return undefined as T; // No Content (a port's DELETE)
    try {
      return JSON.parse(text) as T;
    } catch {
      const what = `${method} ${path}: answer ${status} is not JSON: ${text.slice(0, 200)}`;
      throw new StationError(status, "protocol_error", what);
    }
  }

  /**
   * Follows a server-sent event stream: calls `onEvent` for each event until the server ends
   * the stream (resolves) or `signal` aborts (resolves too). A non-2xx answer throws.
   */
  events(path: string, onEvent: (e: SseEvent) => void, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) return resolve();
      const req = this.open("GET", path, { Accept: "text/event-stream" });
      let settled = false;
      const done = (err?: unknown) => {
        if (settled) return;
        settled = true;
        d.stop();
        signal?.removeEventListener("abort", onAbort);
        if (err) reject(err);
        else resolve();
      };
      const d = this.deadlines(req, this.timeoutMs, this.timeoutMs, done);
      const onAbort = () => {
        req.destroy();
        done();
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      req.on("error", (e) => done(this.connectionError(e)));
      req.on("response", (res) => {
        const status = res.statusCode ?? 0;
        res.setEncoding("utf8");
        d.res = res;
        d.arm(this.timeoutMs + SSE_HEARTBEAT_MS);
        res.on("data", () => d.bump());
        if (status < 200 || status >= 300) {
          let text = "";
          res.on("data", (c: string) => (text += c));
          res.on("end", () => done(errorFromBody(status, text, `GET ${path}`)));
          return;
        }
        const parser = new SseParser(onEvent);
        res.on("data", (c: string) => {
          try {
            parser.push(c);
          } catch (e) {
            req.destroy();
            done(e);
          }
        });
        res.on("error", (e) => done(this.connectionError(e)));
        res.on("end", () => done());
        res.on("close", () => done());
      });
      req.end();
    });
  }

  /**
   * A request whose bodies are bytes, both ways streamed: resolves once a 2xx answer's headers
   * arrived (its body is then read from `body`); throws StationError for any other answer, also
   * one that arrives while a streamed request body is still being sent (the rest is not sent).
   */
  raw(method: string, path: string, request: RawRequest = {}): Promise<RawResponse> {
    const { body, signal } = request;
    const headers: Record<string, string> = { Accept: "*/*", ...request.headers };
    const inMemory = body instanceof Uint8Array;
    if (inMemory) headers["Content-Length"] = String(body.byteLength);
    else if (body !== undefined && request.size !== undefined) headers["Content-Length"] = String(request.size);
    const stream = /text\/event-stream/.test(headers["Accept"] ?? "");
    const t = this.timeoutMs;
    return new Promise<RawResponse>((resolve, reject) => {
      if (signal?.aborted) return reject(abortError());
      const req = this.open(method, path, headers);
      let settled = false;
      const settle = (err: unknown, value?: RawResponse) => {
        if (settled) return;
        settled = true;
        signal?.removeEventListener("abort", onAbort);
        if (err) reject(err);
        else resolve(value!);
      };
      // Once the body is the caller's: a wait while bytes are buffered that it has not read is
      // its own, not the server's.
      const d = this.deadlines(req, t, t + waitOf(path), (e) => settle(e), () => (d.res?.readableLength ?? 0) > 0);
      const onAbort = () => {
        req.destroy(abortError());
        settle(abortError());
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      req.on("error", (e) => settle(this.connectionError(e)));
      req.on("response", (res) => {
        const status = res.statusCode ?? 0;
        d.res = res;
        d.arm(stream && status >= 200 && status < 300 ? t + SSE_HEARTBEAT_MS : t);
        // Progress is seen on the socket: a "data" listener on res would set it flowing and
        // its bytes would be gone before the caller reads them.
        const socket = res.socket;
        const onBytes = () => d.bump();
        socket?.on("data", onBytes);
        res.on("close", () => {
          d.stop();
          socket?.off("data", onBytes);
        });
        if (status >= 200 && status < 300) {
          signal?.removeEventListener("abort", onAbort);
          if (signal) {
            const abortBody = () => res.destroy(abortError());
            signal.addEventListener("abort", abortBody, { once: true });
            res.on("close", () => signal.removeEventListener("abort", abortBody));
          }
          return settle(undefined, { status, headers: res.headers, body: res });
        }
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (text += c));
        res.on("error", () => settle(errorFromBody(status, text, `${method} ${path}`)));
        res.on("end", () => {
          settle(errorFromBody(status, text, `${method} ${path}`));
          req.destroy(); // an unfinished upload stops here
        });
      });
      if (body === undefined || inMemory) {
        req.end(body);
        return;
      }
      pump(req, body, () => settled, () => d.bump()).then(
        () => req.end(),
        (e) => {
          req.destroy();
          settle(e instanceof StationError ? e : this.uploadError(e));
        },
      );
    });
  }

  private uploadError(err: unknown): StationError {
    const msg = err instanceof Error ? err.message : String(err);
    return new StationError(0, "upload_failed", `cannot read what is to be uploaded: ${msg}`, undefined, { cause: err });
  }

  /**
   * A server-sent event stream as an async iterator. Reading slowly slows the connection (the
   * server's own bounded queue decides what is dropped); `return()` (a `break` out of
   * `for await`) or `signal` closes it. A non-2xx answer throws on the first `next()`.
   */
  async *eventStream(path: string, signal?: AbortSignal): AsyncGenerator<SseEvent, void, undefined> {
    const res = await this.raw("GET", path, { headers: { Accept: "text/event-stream" }, signal });
    const queue: SseEvent[] = [];
    const parser = new SseParser((e) => queue.push(e));
    const stream = res.body;
    stream.setEncoding("utf8");
    try {
      for await (const chunk of stream) {
        parser.push(chunk as string);
        while (queue.length) yield queue.shift()!;
      }
    } catch (e) {
      if (signal?.aborted) return;
      throw e instanceof StationError ? e : this.connectionError(e);
    } finally {
      stream.destroy();
    }
  }

  /** A WebSocket handshake (RFC 6455): resolves with the upgraded socket. */
  upgrade(path: string, protocols: string[] = []): Promise<Upgraded> {
    const key = randomBytes(16).toString("base64");
    const headers: Record<string, string> = {
      Connection: "Upgrade",
      Upgrade: "websocket",
      "Sec-WebSocket-Version": "13",
      "Sec-WebSocket-Key": key,
    };
    if (protocols.length) headers["Sec-WebSocket-Protocol"] = protocols.join(", ");
    return new Promise<Upgraded>((resolve, reject) => {
      const req = this.open("GET", path, headers);
      req.on("error", (e) => reject(this.connectionError(e)));
      const d = this.deadlines(req, this.timeoutMs, this.timeoutMs, reject);
      req.on("upgrade", (res, socket, head) => {
        d.stop();
        this.idleWebSocket(socket as Socket);
        const want = createHash("sha1").update(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64");
        if (res.headers["sec-websocket-accept"] !== want) {
          socket.destroy();
          return reject(new StationError(res.statusCode ?? 0, "protocol_error", `GET ${path}: bad Sec-WebSocket-Accept`));
        }
        const p = res.headers["sec-websocket-protocol"];
        resolve({ socket, head, protocol: Array.isArray(p) ? p[0] : p });
      });
      req.on("response", (res) => {
        let text = "";
        d.res = res;
        d.arm(this.timeoutMs);
        res.on("close", () => d.stop());
        res.setEncoding("utf8");
        res.on("data", (c: string) => {
          d.bump();
          text += c;
        });
        res.on("end", () => reject(errorFromBody(res.statusCode ?? 0, text, `GET ${path} (WebSocket)`)));
      });
      req.end();
    });
  }

  /**
   * An upgraded socket silent past the server's ping interval plus the answer deadline has a
   * server that stopped: it is destroyed with the timed-out error (WsHandlers.onClose gets it).
   * A socket the reader paused is not the server's silence.
   */
  private idleWebSocket(socket: Socket): void {
    const ms = this.timeoutMs + WS_PING_MS;
    socket.setTimeout(ms);
    socket.on("timeout", () => {
      if (!socket.isPaused()) socket.destroy(this.timedOut(ms));
    });
  }
}

/** What `Transport.raw` sends: a body in memory, or one streamed from an async iterable. */
export interface RawRequest {
  headers?: Record<string, string>;
  body?: Uint8Array | AsyncIterable<Uint8Array | string>;
  /** With a streamed body: its length (sent as Content-Length), else it is sent chunked. */
  size?: number;
  signal?: AbortSignal;
}

/** A 2xx answer whose body is still to be read. */
export interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Readable;
}

/** A StationError from an error answer; tolerates a body that is not the documented shape. */
export function errorFromBody(status: number, text: string, what: string): StationError {
  try {
    const b = JSON.parse(text) as { error?: { code?: unknown; message?: unknown; field?: unknown } };
    const e = b.error;
    if (e && typeof e.code === "string" && typeof e.message === "string") {
      return makeError(status, e.code, e.message, typeof e.field === "string" ? e.field : undefined);
    }
  } catch {
    // fall through
  }
  const code = status === 0 ? "protocol_error" : "internal";
  return new StationError(status, code, `${what}: HTTP ${status}: ${text.slice(0, 200)}`);
}

function abortError(): Error {
  return new DOMException("the request was aborted", "AbortError");
}

/**
 * Writes an async iterable into a request, waiting for drain; stops early when `stop()` says;
 * `moved()` after each chunk taken.
 */
async function pump(
  req: http.ClientRequest,
  body: AsyncIterable<Uint8Array | string>,
  stop: () => boolean,
  moved: () => void,
): Promise<void> {
  for await (const chunk of body) {
    if (stop()) return;
    moved();
    if (!req.write(chunk, () => moved())) {
      await new Promise<void>((resolve) => {
        const done = () => {
          req.off("drain", done);
          req.off("close", done);
          resolve();
        };
        req.on("drain", done);
        req.on("close", done);
      });
    }
  }
}

/** text/event-stream, per the HTML living standard (ids and retry are not used by the API). */
class SseParser {
  private buf = "";
  private event = "";
  private data: string[] = [];

  constructor(private readonly onEvent: (e: SseEvent) => void) {}

  push(chunk: string): void {
    this.buf += chunk;
    let nl: number;
    while ((nl = this.buf.search(/\r\n|\r|\n/)) >= 0) {
      const line = this.buf.slice(0, nl);
      const skip = this.buf.startsWith("\r\n", nl) ? 2 : 1;
      // A lone \r at the end of the buffer may be the first half of \r\n: wait for more.
      if (skip === 1 && this.buf[nl] === "\r" && nl === this.buf.length - 1) break;
      this.buf = this.buf.slice(nl + skip);
      this.line(line);
    }
  }

  private line(line: string): void {
    if (line === "") {
      if (this.data.length) this.onEvent({ event: this.event || "message", data: this.data.join("\n") });
      this.event = "";
      this.data = [];
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.event = value;
    else if (field === "data") this.data.push(value);
  }
}
