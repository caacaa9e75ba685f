import { hashSecret } from "../../protocol/credential.ts";
import { type SandboxLinkMode, sandboxLinkUrl } from "../../protocol/sandbox-link.ts";
import type { SandboxLinkPort } from "../ports.ts";

/** How the API reaches a sandbox's daemon (SVC_SANDBOX_LINK): the one place the provisioner and the pool ask. */
export type SandboxReach = {
  /** SVC_LINK_URL of the sandbox's environment; undefined when the API dials the daemon itself. */
  linkUrl: string | undefined;
  /** Before the sandbox starts: the key its link will present. */
  expect(serviceKey: string, sandboxId: string): void;
  /**
   * The daemon's URL once the started sandbox (`info`: what the driver's start said) can be reached; `what` names
   * it in the error when it cannot.
   */
  endpoint(sandboxId: string, info: { endpoint: string | null }, deadline: number, what: string): Promise<string>;
  /** The sandbox is gone. */
  forget(sandboxId: string): void;
};

/**
 * `direct`: the container's address, as the driver reports it. `dial-out`: the endpoint of the link the daemon
 * opens to the API (SandboxLinkPort), so the sandbox needs no address the API can route to. With several API
 * replicas the link's URL names this one (`replica`), which waits for it: the edge sends the link here, where a
 * warm-pool member's key, announced only here, is known.
 */
export function sandboxReach(
  mode: SandboxLinkMode,
  apiOrigin: string,
  links: SandboxLinkPort | undefined,
): SandboxReach {
  if (mode === "direct") {
    return {
      linkUrl: undefined,
      expect() {},
      forget() {},
      async endpoint(_sandboxId, info, _deadline, what) {
        if (!info.endpoint) throw new Error(`${what} has no address the API can reach`);
        return info.endpoint;
      },
    };
  }
  if (!links) throw new Error("SVC_SANDBOX_LINK=dial-out needs the API's sandbox links (orchestrator deps.links)");
  return {
    linkUrl: sandboxLinkUrl(apiOrigin, links.replica),
    expect: (serviceKey, sandboxId) => links.expect(hashSecret(serviceKey), sandboxId),
    endpoint: (sandboxId, _info, deadline) => links.waitFor(sandboxId, deadline - Date.now()),
    forget: (sandboxId) => links.forget(sandboxId),
  };
}
