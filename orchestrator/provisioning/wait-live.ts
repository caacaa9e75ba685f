import { DaemonHealth } from "../../protocol/daemon.ts";

class CloneFailed extends Error {}

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
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`${url}/svc/health`, { signal: AbortSignal.timeout(1000) });
      const health = DaemonHealth.safeParse(res.ok ? await res.json() : undefined);
      if (health.success) {
        const { state, error } = health.data.repo;
        if (state === "cloned" || state === "disabled") return;
        if (state === "failed") throw new CloneFailed(`the sandbox could not clone the repository: ${error}`);
        if (!cloning) progress("cloning workspace");
        cloning = true;
      }
    } catch (err) {
      if (err instanceof CloneFailed) throw err;
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error("the sandbox did not become live before the provisioning deadline");
}
