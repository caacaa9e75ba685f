import { isIP } from "node:net";
import { SANDBOX_LINK_PATH, SANDBOX_LINK_REPLICA_PARAM } from "../../protocol/sandbox-link.ts";

/**
 * The replica a sandbox link's upgrade asks for (`/svc/v1/sandbox-link?replica=<address>`, sandbox-reach.ts): an IP
 * address, or undefined for any other request, a link without a hint, or a hint that is no address. Only a hint:
 * the edge follows it to one of its own replicas and nowhere else (upstreams.ts `replica`).
 */
export function linkHint(requestUrl: string | undefined): string | undefined {
  const url = new URL(requestUrl ?? "/", "http://edge.invalid");
  if (url.pathname !== SANDBOX_LINK_PATH) return undefined;
  const hint = url.searchParams.get(SANDBOX_LINK_REPLICA_PARAM)?.toLowerCase();
  return hint && isIP(hint) ? hint : undefined;
}
