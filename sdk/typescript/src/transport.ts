// HTTP/1.1 to the controller over a unix socket or TCP (http: or https:), with node's own
// http module: JSON requests, server-sent event streams and WebSocket upgrades.

import { createHash, randomBytes } from "node:crypto";
import * as http from "node:http";
import * as https from "node:https";
import type { Duplex, Readable } from "node:stream";
import { join } from "node:path";

import { StationError, makeError } from "./errors.js";
import type { WorkersOption } from "./workers.js";

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
   * With several workers: how long a worker may take to answer `GET /v1/worker` or a list
   * before it counts as not answering (milliseconds, default 10000).
   */
  timeoutMs?: number;
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

  constructor(options: ConnectionOptions = {}) {
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
    const { status, text } = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = this.open(method, path, headers);
      req.on("error", (e) => reject(this.connectionError(e)));
      if (timeoutMs !== undefined) {
        const timer = setTimeout(() => {
          const e = Object.assign(new Error(`no answer within ${timeoutMs} ms`), { code: "ETIMEDOUT" });
          req.destroy(e);
        }, timeoutMs);
        req.on("close", () => clearTimeout(timer));
      }
      req.on("response", (res) => {
        const chunks: Buffer[] = [];
        let n = 0;
        res.on("data", (c: Buffer) => {
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
        signal?.removeEventListener("abort", onAbort);
        if (err) reject(err);
        else resolve();
      };
      const onAbort = () => {
        req.destroy();
        done();
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      req.on("error", (e) => done(this.connectionError(e)));
      req.on("response", (res) => {
        const status = res.statusCode ?? 0;
        res.setEncoding("utf8");
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
      const onAbort = () => {
        req.destroy(abortError());
        settle(abortError());
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      req.on("error", (e) => settle(this.connectionError(e)));
      req.on("response", (res) => {
        const status = res.statusCode ?? 0;
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
      pump(req, body, () => settled).then(
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
      req.on("upgrade", (res, socket, head) => {
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
        res.setEncoding("utf8");
        res.on("data", (c: string) => (text += c));
        res.on("end", () => reject(errorFromBody(res.statusCode ?? 0, text, `GET ${path} (WebSocket)`)));
      });
      req.end();
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

/** Writes an async iterable into a request, waiting for drain; stops early when `stop()` says. */
async function pump(req: http.ClientRequest, body: AsyncIterable<Uint8Array | string>, stop: () => boolean): Promise<void> {
  for await (const chunk of body) {
    if (stop()) return;
    if (!req.write(chunk)) {
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
