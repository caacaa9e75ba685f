import { z } from "zod";

/** A tool's output is kept up to this many characters; a longer one is cut and marked. */
export const TOOL_OUTPUT_MAX = 64 * 1024;

/** One tool call of the agent: what it was asked (input) and what it answered (output, cut past TOOL_OUTPUT_MAX). */
export const TranscriptTool = z.object({
  name: z.string(),
  status: z.enum(["running", "completed", "error"]),
  input: z.record(z.string(), z.unknown()),
  output: z.string().nullable(),
  /** The output was longer than TOOL_OUTPUT_MAX and is cut there. */
  output_truncated: z.boolean(),
});
export type TranscriptTool = z.infer<typeof TranscriptTool>;

/**
 * What the agent runtime said or did, as the daemon reports it (GET /svc/transcript, the `entry` AgentEvent): one
 * part of a message, identified by the runtime's part id (`key`), sent again whole whenever it changes.
 */
export const RuntimeEntry = z.object({
  key: z.string().min(1).max(200),
  /** The runtime's conversation (PromptAccepted.session) it belongs to. */
  conversation: z.string().max(200),
  role: z.enum(["assistant", "tool"]),
  text: z.string(),
  tool: TranscriptTool.nullable(),
  at: z.iso.datetime(),
});
export type RuntimeEntry = z.infer<typeof RuntimeEntry>;

/**
 * GET /svc/transcript[?conversation=<id>]: every assistant and tool part of every conversation the runtime holds
 * (or of the one named), oldest first.
 */
export const RuntimeTranscript = z.object({ entries: z.array(RuntimeEntry) });
export type RuntimeTranscript = z.infer<typeof RuntimeTranscript>;

/**
 * GET /v1/projects/{id}/sessions/{sid}/transcript: one entry of a session's stored conversation. `seq` orders
 * entries as they first appeared; `rev` grows with every change, so `?after_rev=N` returns what changed since a
 * read whose highest `rev` was N (an entry still streaming comes again, longer).
 */
export const TranscriptEntry = z.object({
  seq: z.number().int(),
  rev: z.number().int(),
  role: z.enum(["user", "assistant", "tool"]),
  text: z.string(),
  at: z.iso.datetime(),
  conversation: z.string().nullable(),
  tool: TranscriptTool.nullable(),
});
export type TranscriptEntry = z.infer<typeof TranscriptEntry>;

export const Transcript = z.array(TranscriptEntry);
export type Transcript = z.infer<typeof Transcript>;

export const TranscriptQuery = z
  .object({ after_rev: z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional() })
  .strict();
export type TranscriptQuery = z.infer<typeof TranscriptQuery>;

/** A tool output as stored: whole, or cut at TOOL_OUTPUT_MAX and marked. */
export function capToolOutput(output: string | null | undefined): { output: string | null; output_truncated: boolean } {
  if (output === null || output === undefined) return { output: null, output_truncated: false };
  if (output.length <= TOOL_OUTPUT_MAX) return { output, output_truncated: false };
  return { output: output.slice(0, TOOL_OUTPUT_MAX), output_truncated: true };
}
