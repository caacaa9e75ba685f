import { z } from "zod";
import { PromptBody } from "./daemon.ts";
import { BranchName } from "./project.ts";
import { SafeName, SafeText } from "./text.ts";

export const SessionStatus = z.enum([
  "queued",
  "branching",
  "provisioning",
  "running",
  "stopped",
  "failed",
  "completed",
]);
export type SessionStatus = z.infer<typeof SessionStatus>;

export const SandboxStatus = z.enum(["provisioning", "active", "stopped", "error", "archived"]);
export type SandboxStatus = z.infer<typeof SandboxStatus>;

export const Session = z.object({
  session_id: z.string(),
  project_id: z.uuid(),
  status: SessionStatus,
  branch: z.string(),
  base_ref: z.string(),
  agent_name: z.string(),
  agent_model: z.string().nullable(),
  sandbox_url: z.string().nullable(),
  error: z.string().nullable(),
  /**
   * What a provisioning session is doing now, for a person to read (`building image: step 2/5 RUN make`,
   * `starting sandbox`, `cloning workspace`); null otherwise. Absent from servers that predate it.
   */
  progress: z.string().nullable().optional(),
  created_by: z.uuid(),
  /** The manifest trigger that spawned the session (its slug), null for one a person or agent created. */
  trigger: z.string().nullable(),
  /**
   * The commit at refs/svc/checkpoints/<session id>: the work the session's last sandbox had not pushed when it
   * stopped, restored into its next one; null when there was none. Absent from servers that predate it.
   */
  checkpoint_sha: z.string().nullable().optional(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type Session = z.infer<typeof Session>;

export const CreateSessionBody = z
  .object({
    prompt: SafeText.min(1).max(200_000).optional(),
    agent: SafeName.min(1).max(100).optional(),
    model: SafeName.min(1).max(200).optional(),
    /** Validated like every branch a client names: `-rf`, `a..b` or `--upload-pack=…` never reach git. */
    base_ref: BranchName.optional(),
  })
  .strict();
export type CreateSessionBody = z.infer<typeof CreateSessionBody>;

/** A session on its way to `running`: what `wait_for=running` waits out. */
export const STARTING_STATUSES: readonly SessionStatus[] = ["queued", "branching", "provisioning"];

/** The longest a `wait_for` read is held open, in seconds. */
const SESSION_WAIT_MAX_S = 60;
export const SESSION_WAIT_DEFAULT_S = 30;

/**
 * GET /v1/projects/{id}/sessions/{sid}[?wait_for=running[&timeout_s=N][&progress=P]]: without `wait_for`, the
 * session now. With it, the answer comes as soon as the session is no longer starting (STARTING_STATUSES), or, with
 * `progress` (the progress line the client shows; empty for none), as soon as its progress is another one, or when
 * `timeout_s` (1 to SESSION_WAIT_MAX_S, default 30) have passed: the session as it is then, in every case.
 */
export const SessionWaitQuery = z
  .object({
    wait_for: z.literal("running").optional(),
    timeout_s: z.coerce.number().int().min(1).max(SESSION_WAIT_MAX_S).optional(),
    progress: z.string().max(1000).optional(),
  })
  .strict()
  .refine((q) => q.wait_for !== undefined || (q.timeout_s === undefined && q.progress === undefined), {
    message: "timeout_s and progress go with wait_for=running",
    path: ["wait_for"],
  });

export const SessionList = z.object({ sessions: z.array(Session) });
export type SessionList = z.infer<typeof SessionList>;

/**
 * POST /v1/projects/{id}/sessions/{sid}/messages: a prompt for the session's agent, as the daemon takes it
 * (`new` starts a new conversation) except that the API picks the conversation.
 */
export const SessionMessageBody = PromptBody.omit({ session: true });
export type SessionMessageBody = z.infer<typeof SessionMessageBody>;

/** The agent's conversation the message went to: events of that conversation carry it as `session`. */
export const SessionMessageAccepted = z.object({ conversation: z.string() });
export type SessionMessageAccepted = z.infer<typeof SessionMessageAccepted>;

export const SessionAbortResult = z.object({ aborted: z.array(z.string()) });
export type SessionAbortResult = z.infer<typeof SessionAbortResult>;
