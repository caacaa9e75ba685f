import { capToolOutput, type RuntimeEntry } from "../protocol/transcript.ts";
import type { AgentClient } from "./agent-client.ts";

/** A message part as opencode reports it (its `/event` stream and `GET /session/{id}/message`). */
export type RuntimePart = {
  id: string;
  messageID: string;
  sessionID: string;
  type: string;
  text?: string;
  tool?: string;
  time?: { start?: number; end?: number };
  state?: {
    status?: string;
    title?: string;
    input?: Record<string, unknown>;
    output?: string;
    error?: string;
    time?: { start?: number; end?: number };
  };
};

const TOOL_STATUSES = new Set(["running", "completed", "error"]);

/**
 * The transcript entry of an assistant's part: its text, or a tool call with its input and (cut) output; none
 * for an empty text, a tool still pending, or a part of another kind (step markers, reasoning, snapshots).
 */
export function entryOfPart(part: RuntimePart, fallbackAt: number, text = part.text): RuntimeEntry | undefined {
  const started = part.time?.start ?? part.state?.time?.start ?? fallbackAt;
  const base = { key: part.id, conversation: part.sessionID, at: new Date(started).toISOString() };
  if (part.type === "text") {
    if (!text) return undefined;
    return { ...base, role: "assistant", text, tool: null };
  }
  const status = part.state?.status;
  if (part.type !== "tool" || !status || !TOOL_STATUSES.has(status)) return undefined;
  const raw = status === "error" ? part.state?.error : status === "completed" ? part.state?.output : undefined;
  return {
    ...base,
    role: "tool",
    text: part.state?.title ?? (part.state?.input?.description as string | undefined) ?? "",
    tool: {
      name: part.tool ?? "tool",
      status: status as "running" | "completed" | "error",
      input: part.state?.input ?? {},
      ...capToolOutput(raw),
    },
  };
}

type RuntimeMessage = { info: { id: string; role: string; time?: { created?: number } }; parts: RuntimePart[] };

/**
 * GET /svc/transcript[?conversation=<id>]: every assistant text and tool part of every conversation the runtime holds
 * (or of the one named), oldest first, read from the runtime's own store. The API's recorder reads it when it (re)connects, so what happened while it
 * was away is stored too. The person's messages are left out: the API stored them as they came in.
 */
export async function readTranscript(client: AgentClient, conversation?: string): Promise<RuntimeEntry[]> {
  const entries: RuntimeEntry[] = [];
  for (const session of await client.conversations()) {
    if (conversation && session.id !== conversation) continue;
    const messages = (await client.messages(session.id)) as RuntimeMessage[];
    for (const { info, parts } of messages) {
      if (info.role !== "assistant") continue;
      for (const part of parts) {
        const entry = entryOfPart(part, info.time?.created ?? Date.now());
        if (entry) entries.push(entry);
      }
    }
  }
  return entries.sort((a, b) => a.at.localeCompare(b.at));
}
