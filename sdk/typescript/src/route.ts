// The client's wire with several workers: each request for a workspace goes to the worker its
// id names; a worker that does not answer becomes a WorkerUnavailableError naming it.

import { StationError } from "./errors.js";
import { Transport, type RawRequest, type RawResponse, type SseEvent, type Upgraded } from "./transport.js";
import { WorkerUnavailableError, reasonOf, workerOfId, type WorkerConfig } from "./workers.js";

/** What StationClient needs of its wire: one Transport, or a Router over several. */
export interface Wire {
  readonly where: string;
  json<T>(
    method: string,
    path: string,
    body?: unknown,
    accept?: (status: number) => boolean,
    extraHeaders?: Record<string, string>,
    timeoutMs?: number,
  ): Promise<T>;
  raw(method: string, path: string, request?: RawRequest): Promise<RawResponse>;
  eventStream(path: string, signal?: AbortSignal): AsyncGenerator<SseEvent, void, undefined>;
  upgrade(path: string, protocols?: string[]): Promise<Upgraded>;
}

export interface Route {
  config: WorkerConfig;
  transport: Transport;
}

/** No answer came (status 0, connection_failed): the worker did not answer. */
export function unavailable(route: Route, e: unknown): unknown {
  if (e instanceof WorkerUnavailableError) return e;
  if (e instanceof StationError && e.status === 0 && e.code === "connection_failed")
    return new WorkerUnavailableError(route.config.name, route.config.url, reasonOf(e), { cause: e });
  return e;
}

export class Router implements Wire {
  readonly routes: Map<string, Route>;

  /** `source` names where the list came from, for the error about an unknown worker. */
  constructor(
    workers: WorkerConfig[],
    token: string | undefined,
    readonly source: string,
    timeoutMs?: number,
  ) {
    this.routes = new Map();
    for (const w of workers) {
      const where = w.url.startsWith("unix:") ? { socketPath: w.url.slice(5) } : { url: w.url };
      const transport = new Transport({ ...where, token: w.token ?? token, timeoutMs }, { name: w.name, url: w.url });
      this.routes.set(w.name, { config: w, transport });
    }
  }

  get where(): string {
    return [...this.routes.values()].map((r) => `${r.config.name}=${r.config.url}`).join(",");
  }

  get names(): string[] {
    return [...this.routes.keys()];
  }

  /** The route of a worker by name; an error naming it when it is not configured. */
  route(name: string, why?: string): Route {
    const r = this.routes.get(name);
    if (r) return r;
    const msg = why ? `${why} is on worker ${name}, which is not in ${this.source}` : `worker ${name} is not in ${this.source}`;
    throw new StationError(404, "not_found", msg);
  }

  /** The route of a workspace id. */
  routeOfId(id: string): Route {
    const name = workerOfId(id);
    return this.route(name, `workspace ${id}`);
  }

  /** The route of a request path: `/v1/workspaces/ID…`, or `/v1/events?workspace=ID`. */
  private pick(method: string, path: string): Route {
    const m = /^\/v1\/workspaces\/([^/?]+)/.exec(path);
    if (m) return this.routeOfId(decodeURIComponent(m[1]!));
    const q = path.indexOf("?");
    if (q >= 0 && path.startsWith("/v1/events")) {
      const ws = new URLSearchParams(path.slice(q + 1)).get("workspace");
      if (ws) return this.routeOfId(ws);
    }
    throw new TypeError(
      `${method} ${path.replace(/\?.*/, "")}: this client has several workers (${this.names.join(", ")}): ` +
        `pick one with client.on(NAME)`,
    );
  }

  async json<T>(
    method: string,
    path: string,
    body?: unknown,
    accept?: (status: number) => boolean,
    extraHeaders: Record<string, string> = {},
    timeoutMs?: number,
  ): Promise<T> {
    const r = this.pick(method, path);
    try {
      return await r.transport.json<T>(method, path, body, accept, extraHeaders, timeoutMs);
    } catch (e) {
      throw unavailable(r, e);
    }
  }

  async raw(method: string, path: string, request?: RawRequest): Promise<RawResponse> {
    const r = this.pick(method, path);
    try {
      return await r.transport.raw(method, path, request);
    } catch (e) {
      throw unavailable(r, e);
    }
  }

  async *eventStream(path: string, signal?: AbortSignal): AsyncGenerator<SseEvent, void, undefined> {
    const r = this.pick("GET", path);
    try {
      yield* r.transport.eventStream(path, signal);
    } catch (e) {
      throw unavailable(r, e);
    }
  }

  async upgrade(path: string, protocols: string[] = []): Promise<Upgraded> {
    const r = this.pick("GET", path);
    try {
      return await r.transport.upgrade(path, protocols);
    } catch (e) {
      throw unavailable(r, e);
    }
  }
}
