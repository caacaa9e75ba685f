import type { EgressPort } from "../../orchestrator/ports.ts";
import { hashSecret } from "../../protocol/credential.ts";
import { type EgressRule, parseEgressEntry } from "../../protocol/egress.ts";
import type { Project } from "../../protocol/project.ts";
import type { ManifestReader } from "../manifest/reader.ts";
import type { ProjectStore } from "../projects/store.ts";
import type { SessionStore } from "../sessions/store.ts";
import { createTtlCache } from "../ttl-cache.ts";
import { createEgressProxy, type EgressProxy } from "./proxy.ts";
import { notPublic, resolveTarget } from "./target.ts";

/** A sandbox's key and its project's list are read per proxied connection: a stopped sandbox or a merge takes this long. */
const CACHE_MS = 2000;
const REPORT_TIMEOUT_MS = 5000;
const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]", "0.0.0.0", "host.docker.internal"]);

const rulesOf = (list: string[]): EgressRule[] =>
  list.map(parseEgressEntry).filter((r): r is EgressRule => !("error" in r));

/** The stack's model gateway, when sandboxes reach it through the proxy rather than on the host. */
function gatewayRule(baseUrl: string | undefined): EgressRule[] {
  if (!baseUrl) return [];
  const url = new URL(baseUrl);
  if (LOOPBACK.has(url.hostname)) return [];
  const parsed = parseEgressEntry(`${url.hostname}:${url.port || (url.protocol === "https:" ? 443 : 80)}`);
  return "error" in parsed ? [] : [parsed];
}

/**
 * `[sandbox] egress` as the orchestrator needs it (which sandboxes go out through the proxy) and the proxy that
 * enforces it, both from the project's manifest on its default branch.
 */
export function createEgress(deps: {
  sessions: Pick<SessionStore, "liveSandboxByKey">;
  projects: Pick<ProjectStore, "byId">;
  manifests: ManifestReader;
  /** The stack's model gateway (SVC_LLM_BASE_URL). */
  llmBaseUrl?: string;
  log: (msg: string, extra?: Record<string, unknown>) => void;
}): { port: EgressPort; proxy: EgressProxy } {
  const listOf = async (project: Project) => (await deps.manifests.read(project)).manifest.sandbox.egress;
  const sandboxes = createTtlCache<string, Awaited<ReturnType<SessionStore["liveSandboxByKey"]>>>(CACHE_MS);
  const rules = createTtlCache<string, EgressRule[] | null>(CACHE_MS);

  const proxy = createEgressProxy({
    async sandboxOf(serviceKey) {
      const row = await sandboxes.get(serviceKey, () => deps.sessions.liveSandboxByKey(hashSecret(serviceKey)));
      return row && { sessionId: row.session_id, projectId: row.project_id, url: row.url };
    },
    rules: (projectId) =>
      rules.get(projectId, async () => {
        const project = await deps.projects.byId(projectId);
        const list = project ? await listOf(project) : [];
        return list === undefined ? null : rulesOf(list);
      }),
    always: gatewayRule(deps.llmBaseUrl),
    resolve: resolveTarget,
    notPublic,
    refused(sandbox, serviceKey, refusal) {
      if (!sandbox.url) return;
      void fetch(`${sandbox.url}/svc/egress-refused`, {
        method: "POST",
        headers: { authorization: `Bearer ${serviceKey}`, "content-type": "application/json" },
        body: JSON.stringify(refusal),
        signal: AbortSignal.timeout(REPORT_TIMEOUT_MS),
      })
        .then((res) => res.body?.cancel())
        .catch((err) => deps.log("could not tell a sandbox of its egress refusal", { error: String(err) }));
    },
    log: (msg, extra) => deps.log(msg, extra),
  });

  return { port: { proxied: async (project) => (await listOf(project)) !== undefined }, proxy };
}
