import { z } from "zod";

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
  created_by: z.uuid(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type Session = z.infer<typeof Session>;

export const Sandbox = z.object({
  sandbox_id: z.uuid(),
  session_id: z.string(),
  status: SandboxStatus,
  container_id: z.string().nullable(),
  image: z.string().nullable(),
  url: z.string().nullable(),
  error: z.string().nullable(),
  last_activity_at: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type Sandbox = z.infer<typeof Sandbox>;
