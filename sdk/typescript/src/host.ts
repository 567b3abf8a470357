// `import { HostSandboxAdapter } from "station-sandbox/host"`: workspaces that run directly on
// the worker (tools installed on the host), contained by cgroups but not isolated.

import { SandboxAdapter, CONTAINER_CHECKS, NETWORK_CHECKS, type AdapterOptions, type WorkspaceOptions } from "./adapter.js";
import type { CreateWorkspaceRequest } from "./types.js";

export type HostSandboxAdapterOptions = AdapterOptions;

export class HostSandboxAdapter extends SandboxAdapter {
  readonly adapter = "host" as const;

  constructor(options: HostSandboxAdapterOptions = {}) {
    super(options);
  }

  protected createRequest(overrides: WorkspaceOptions): CreateWorkspaceRequest {
    return { adapter: "host", ...this.workspaceOptions, ...overrides };
  }

  protected checkMatters(name: string): boolean {
    return !CONTAINER_CHECKS.has(name) && !NETWORK_CHECKS.has(name);
  }
}

export * from "./common.js";
