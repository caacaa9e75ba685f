import type Docker from "dockerode";

export type PooledContainer = { Id: string; Created: number; Labels: Record<string, string> };

/**
 * A project's pooled sandbox whose daemon answers `ready` and whose session id no session has taken yet: what the
 * next fitting session claims. `taken(id)` tells whether a session with that id exists. `runtime`: only one whose
 * agent runtime serves already (`running`: warmed up) or has not started (`on-claim`: boots when claimed).
 */
export async function readyPoolMember(
  docker: Docker,
  projectId: string,
  taken: (sessionId: string) => Promise<boolean>,
  /** Where the API reaches a sandbox's daemon (its link's bridge): `api.services.sandboxLinks.endpoint`. */
  endpointOf: (sandboxId: string) => string | undefined,
  options: { timeoutMs?: number; runtime?: "running" | "on-claim" } = {},
): Promise<PooledContainer> {
  const { timeoutMs = 240_000, runtime } = options;
  const wanted = { running: "running", "on-claim": "stopped" } as const;
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const pooled = (await docker.listContainers({
      filters: { label: [`dev.svc.project=${projectId}`, "dev.svc.pool"] },
    })) as PooledContainer[];
    for (const c of pooled) {
      if (await taken(c.Labels["dev.svc.session"]!)) continue;
      const endpoint = endpointOf(c.Labels["dev.svc.sandbox"]!);
      if (!endpoint) continue;
      const health = await fetch(`${endpoint}/svc/health`).then(
        (r) => r.json() as Promise<{ pool?: string; agent?: { state: string } }>,
        () => undefined,
      );
      if (runtime && health?.agent?.state !== wanted[runtime]) continue;
      if (health?.pool !== "ready") continue;
      // The pool marks it claimable once it has seen this too (it polls every 50 ms); one it dropped meanwhile (its
      // check found it stale or not answering) is forgotten by its link at once, though its container lingers.
      await new Promise((r) => setTimeout(r, 300));
      if (endpointOf(c.Labels["dev.svc.sandbox"]!)) return c;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  // What each pooled container was doing: the failure's own evidence.
  const seen: string[] = [];
  for (const c of (await docker.listContainers({
    all: true,
    filters: { label: [`dev.svc.project=${projectId}`, "dev.svc.pool"] },
  })) as (PooledContainer & { State: string })[]) {
    const log = await docker.getContainer(c.Id).logs({ stdout: true, stderr: true, tail: 15 });
    seen.push(`${c.Labels["dev.svc.session"]} ${c.State}:\n${log.toString("utf8")}`);
  }
  throw new Error(
    `no pooled sandbox of project ${projectId} became ready in ${timeoutMs} ms; pooled containers:\n${seen.join("\n") || "none"}`,
  );
}
