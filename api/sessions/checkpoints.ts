import type { SandboxRecord } from "../../orchestrator/ports.ts";
import { CheckpointResult } from "../../protocol/daemon.ts";
import type { SessionStore } from "./store.ts";

/** A stop waits this long for the sandbox to push its unsaved work; a slower one is stopped without it. */
const CHECKPOINT_TIMEOUT_MS = 30_000;

/**
 * The orchestrator's checkpoint port: asks a running sandbox's daemon to push its unsaved work to the session's
 * checkpoint ref (daemon/checkpoint.ts). The push itself records `checkpoint_sha` (api/git/routes.ts).
 */
export function sandboxCheckpoint(deps: {
  sessions: Pick<SessionStore, "sealedServiceKey">;
  openServiceKey: (sealed: string) => string;
}) {
  return async (sandbox: SandboxRecord & { url: string }): Promise<void> => {
    const sealed = await deps.sessions.sealedServiceKey(sandbox.sandbox_id);
    if (!sealed) return;
    const res = await fetch(`${sandbox.url}/svc/checkpoint`, {
      method: "POST",
      headers: { authorization: `Bearer ${deps.openServiceKey(sealed)}`, "content-type": "application/json" },
      body: "{}",
      signal: AbortSignal.timeout(CHECKPOINT_TIMEOUT_MS),
    });
    if (!res.ok) throw new Error(`the sandbox answered ${res.status}: ${(await res.text()).slice(0, 300)}`);
    CheckpointResult.parse(await res.json());
  };
}
