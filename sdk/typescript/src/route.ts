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

/**
 * Whether `ws` is a workspace name rather than an id (`WORKER-<26 of [a-z2-7]>`): the shape
 * alone tells them apart, on every worker.
 */
export function isWorkspaceName(ws: string): boolean {
  const dash = ws.lastIndexOf("-");
  if (dash > 0 && /^[a-z2-7]{26}$/.test(ws.slice(dash + 1))) return false;
  return /^[a-z0-9][a-z0-9._-]{0,62}$/.test(ws);
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

  /**
   * The route of a workspace by id or by name: a name is looked up on every worker at once
   * (`GET /v1/workspaces?name=`); the one that has it. None: 404; several: an error naming each
   * worker and id (docs/api.md, "Names and labels").
   */
  async routeOfWorkspace(ws: string): Promise<Route> {
    if (!isWorkspaceName(ws)) return this.routeOfId(ws);
    const routes = [...this.routes.values()];
    const answers = await Promise.all(
      routes.map(async (r) => {
        try {
          const doc = await r.transport.json<{ workspaces: { id: string; worker: string }[] }>(
            "GET",
            `/v1/workspaces?name=${encodeURIComponent(ws)}`,
          );
          return { r, list: Array.isArray(doc?.workspaces) ? doc.workspaces : [] };
        } catch (e) {
          return { r, error: unavailable(r, e) };
        }
      }),
    );
    const found = answers.flatMap((a) => (a.list ?? []).map((w) => ({ route: a.r, id: w.id })));
    if (found.length > 1) {
      const holders = found.map((f) => `${f.route.config.name} (${f.id})`).join(", ");
      throw new StationError(0, "invalid_argument", `workspace name '${ws}' is on several workers: ${holders}; use the id`, "name");
    }
    if (found.length === 1) return found[0]!.route;
    const failed = answers.find((a) => a.error !== undefined);
    if (failed) {
      const e = failed.error;
      const why = e instanceof WorkerUnavailableError ? reasonOf(e.cause) : e instanceof Error ? e.message : String(e);
      throw new StationError(404, "not_found", `no worker that answered has a workspace named '${ws}' (${why})`);
    }
    throw new StationError(404, "not_found", `no worker has a workspace named '${ws}'`);
  }

  /** The route of a request path: `/v1/workspaces/ID…`, or `/v1/events?workspace=ID`. */
  private async pick(method: string, path: string): Promise<Route> {
    const m = /^\/v1\/workspaces\/([^/?]+)/.exec(path);
    if (m) return this.routeOfWorkspace(decodeURIComponent(m[1]!));
    const q = path.indexOf("?");
    if (q >= 0 && path.startsWith("/v1/events")) {
      const ws = new URLSearchParams(path.slice(q + 1)).get("workspace");
      if (ws) return this.routeOfWorkspace(ws);
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
    const r = await this.pick(method, path);
    try {
      return await r.transport.json<T>(method, path, body, accept, extraHeaders, timeoutMs);
    } catch (e) {
      throw unavailable(r, e);
    }
  }

  async raw(method: string, path: string, request?: RawRequest): Promise<RawResponse> {
    const r = await this.pick(method, path);
    try {
      return await r.transport.raw(method, path, request);
    } catch (e) {
      throw unavailable(r, e);
    }
  }

  async *eventStream(path: string, signal?: AbortSignal): AsyncGenerator<SseEvent, void, undefined> {
    const r = await this.pick("GET", path);
    try {
      yield* r.transport.eventStream(path, signal);
    } catch (e) {
      throw unavailable(r, e);
    }
  }

  async upgrade(path: string, protocols: string[] = []): Promise<Upgraded> {
    const r = await this.pick("GET", path);
    try {
      return await r.transport.upgrade(path, protocols);
    } catch (e) {
      throw unavailable(r, e);
    }
  }
}
