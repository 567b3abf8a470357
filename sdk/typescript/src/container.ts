// `import { ContainerSandboxAdapter } from "station-sandbox/container"`: workspaces in an OCI
// container on an image pinned by digest, under a seccomp profile. Creation fails (it never
// falls back to the host) when the runtime, the image or the profile is unavailable.

import { SandboxAdapter, type AdapterOptions, type WorkspaceOptions } from "./adapter.js";
import { StationError } from "./errors.js";
import type { CreateWorkspaceRequest } from "./types.js";

export interface ContainerSandboxAdapterOptions extends AdapterOptions {
  /** `name@sha256:<64 hex>` or `sha256:<64 hex>`, already in the worker's image store. */
  image: string;
  /** A Docker-format seccomp profile in the worker's profile directories: a name ("default")
   * or an absolute path beneath one of them; default: the worker's. */
  seccompProfile?: string;
  /** `none` (the default): a private network namespace with loopback only. */
  network?: "none";
}

const DIGEST = /(?:^|@)(sha256:[0-9a-f]{64})$/;

export class ContainerSandboxAdapter extends SandboxAdapter {
  readonly adapter = "container" as const;
  readonly image: string;
  readonly seccompProfile: string | undefined;
  readonly network: "none" | undefined;

  constructor(options: ContainerSandboxAdapterOptions) {
    super(options);
    if (!options || typeof options.image !== "string" || options.image === "")
      throw new TypeError("ContainerSandboxAdapter needs an image pinned by digest (name@sha256:…)");
    this.image = options.image;
    this.seccompProfile = options.seccompProfile;
    this.network = options.network;
  }

  protected createRequest(overrides: WorkspaceOptions): CreateWorkspaceRequest {
    const req: CreateWorkspaceRequest = { adapter: "container", image: this.image, ...this.workspaceOptions, ...overrides };
    if (this.seccompProfile !== undefined) req.seccompProfile = this.seccompProfile;
    if (this.network !== undefined) req.network = this.network;
    return req;
  }

  protected checkMatters(name: string): boolean {
    // `image` is about the worker's default image; this adapter names its own (checked below).
    return name !== "image";
  }

  protected override async extraChecks(): Promise<string[]> {
    const m = DIGEST.exec(this.image);
    if (!m) return [`image: "${this.image}" is not pinned by digest (name@sha256:<64 hex>)`];
    try {
      await this.client.image(m[1]!);
      return [];
    } catch (e) {
      if (e instanceof StationError && e.status === 404)
        return [`image: ${this.image} is not in the worker's image store (import or pull it first)`];
      throw e;
    }
  }
}

export * from "./common.js";
