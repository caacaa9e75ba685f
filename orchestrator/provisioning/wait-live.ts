import { DaemonHealth } from "../../protocol/daemon.ts";

/** A sandbox daemon's health, or undefined when it does not answer (in `timeoutMs`) or answers something else. */
export async function readHealth(url: string, timeoutMs: number): Promise<DaemonHealth | undefined> {
  const res = await fetch(`${url}/svc/health`, { signal: AbortSignal.timeout(timeoutMs) }).catch(() => undefined);
  const health = DaemonHealth.safeParse(res?.ok ? await res.json().catch(() => undefined) : undefined);
  return health.success ? health.data : undefined;
}

/**
 * Polls a sandbox daemon's health until `check` settles it: true (done), a string (failed, and why), undefined
 * (keep asking). A daemon that does not answer yet is asked again; `deadline` ends it with `timeout`'s error.
 */
export async function waitHealth(
  url: string,
  deadline: number,
  check: (health: DaemonHealth) => true | string | undefined,
  options: { everyMs?: number; timeout: string; stopped?: () => boolean },
): Promise<void> {
  while (Date.now() < deadline && !options.stopped?.()) {
    const health = await readHealth(url, 1000);
    const verdict = health ? check(health) : undefined;
    if (verdict === true) return;
    if (typeof verdict === "string") throw new Error(verdict);
    await new Promise((r) => setTimeout(r, options.everyMs ?? 25));
  }
  throw new Error(options.timeout);
}

/**
 * Live means the daemon answers and the workspace is cloned: a session is not `running` on an empty sandbox.
 * `progress` hears when the clone starts.
 */
export async function waitLive(
  url: string,
  deadline: number,
  progress: (step: string) => void = () => {},
): Promise<void> {
  let cloning = false;
  await waitHealth(
    url,
    deadline,
    ({ repo }) => {
      if (repo.state === "cloned" || repo.state === "disabled") return true;
      if (repo.state === "failed") return `the sandbox could not clone the repository: ${repo.error}`;
      if (!cloning) progress("cloning workspace");
      cloning = true;
      return undefined;
    },
    { timeout: "the sandbox did not become live before the provisioning deadline" },
  );
}
