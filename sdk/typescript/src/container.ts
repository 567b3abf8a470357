// `import { ContainerSandboxAdapter } from "station-sandbox/container"`: workspaces in an OCI
// container on an image pinned by digest (the worker's default image when none is named), under
// a seccomp profile. Creation fails (it never falls back to the host) when the runtime, the
// image or the profile is unavailable.

import { SandboxAdapter, NETWORK_CHECKS, type AdapterOptions, type WorkspaceOptions } from "./adapter.js";
import { StationError } from "./errors.js";
import type { CreateWorkspaceRequest, EgressPolicy, NetworkMode } from "./types.js";

export interface ContainerSandboxAdapterOptions extends AdapterOptions {
  /** `name@sha256:<64 hex>` or `sha256:<64 hex>`, already in the worker's image store; absent:
   * the worker's default image (`--default-image`), as the API's create without `image`. */
  image?: string;
  /** A Docker-format seccomp profile in the worker's profile directories: a name ("default")
   * or an absolute path beneath one of them; default: the worker's. */
  seccompProfile?: string;
  /**
   * `none` (the default): a private network namespace with loopback only. `bridge`: outbound
   * access through NAT (never to other workspaces, the worker, link-local or private ranges
   * unless the operator opened them). `restricted`: bridge with an enforced egress policy,
   * default deny.
   */
  network?: NetworkMode;
  /**
   * The seed's setting: `true` is `network: "restricted"`, and the worker enforces `egress`
   * (nftables and DNS pinning); without `egress` every destination is denied.
   */
  networkRestricted?: boolean;
  /**
   * What a restricted workspace may reach, e.g. `{allow: [{domain: "github.com"},
   * {domain: "*.npmjs.org", ports: [443]}, {cidr: "203.0.113.0/24", proto: "tcp"}]}`. Implies
   * `network: "restricted"` when `network` is not given.
   */
  egress?: EgressPolicy;
}

/** The network mode these options ask for; a TypeError when they contradict each other. */
function networkOf(o: ContainerSandboxAdapterOptions): NetworkMode | undefined {
  const { network, networkRestricted, egress } = o;
  if (network !== undefined && !["none", "bridge", "restricted"].includes(network))
    throw new TypeError(`network must be "none", "bridge" or "restricted", not ${JSON.stringify(network)}`);
  if (networkRestricted === true && network !== undefined && network !== "restricted")
    throw new TypeError(`networkRestricted: true contradicts network: "${network}"`);
  if (networkRestricted === false && network === "restricted")
    throw new TypeError(`networkRestricted: false contradicts network: "restricted"`);
  if (egress !== undefined && (networkRestricted === false || (network !== undefined && network !== "restricted")))
    throw new TypeError(`egress needs network "restricted" (or networkRestricted: true)`);
  if (networkRestricted === true || egress !== undefined) return "restricted";
  return network;
}

const DIGEST = /(?:^|@)(sha256:[0-9a-f]{64})$/;

export class ContainerSandboxAdapter extends SandboxAdapter {
  readonly adapter = "container" as const;
  /** The image this adapter names; undefined: the worker's default. */
  readonly image: string | undefined;
  readonly seccompProfile: string | undefined;
  readonly network: NetworkMode | undefined;
  readonly egress: EgressPolicy | undefined;

  constructor(options: ContainerSandboxAdapterOptions) {
    super(options);
    if (!options || (options.image !== undefined && (typeof options.image !== "string" || options.image === "")))
      throw new TypeError("ContainerSandboxAdapter's image is a reference pinned by digest (name@sha256:…), or absent for the worker's default");
    this.image = options.image;
    this.seccompProfile = options.seccompProfile;
    this.network = networkOf(options);
    this.egress = options.egress;
  }

  protected createRequest(overrides: WorkspaceOptions): CreateWorkspaceRequest {
    const req: CreateWorkspaceRequest = { adapter: "container", ...this.workspaceOptions, ...overrides };
    if (this.image !== undefined) req.image = this.image;
    if (this.seccompProfile !== undefined) req.seccompProfile = this.seccompProfile;
    if (this.network !== undefined) req.network = this.network;
    if (this.egress !== undefined) req.egress = this.egress;
    return req;
  }

  protected checkMatters(name: string): boolean {
    // `image` is about the worker's default image: it matters when this adapter names none (one
    // it names is checked below).
    if (name === "image") return this.image === undefined;
    return !NETWORK_CHECKS.has(name) || (this.network !== undefined && this.network !== "none");
  }

  protected override async extraChecks(): Promise<string[]> {
    if (this.image === undefined) return [];
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
