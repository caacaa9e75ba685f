import { z } from "zod";

/** `POST /v1/admin/sessions/stop`: the sessions it stopped (what `svc self-host stop --sandboxes` reports). */
export const StoppedSessions = z.object({ stopped: z.array(z.string()) });
export type StoppedSessions = z.infer<typeof StoppedSessions>;
