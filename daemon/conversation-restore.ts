import { Transcript, type TranscriptEntry } from "../protocol/transcript.ts";
import type { AgentClient } from "./agent-client.ts";
import type { DaemonConfig } from "./config.ts";
import { httpRequest } from "./http-json.ts";

/** What of the earlier conversation the restored runtime is given: the newest entries up to this many characters. */
const RESTORED_MAX_CHARS = 60_000;
/** A tool's output as the restored runtime sees it: its start, enough to know what happened. */
const RESTORED_TOOL_OUTPUT_CHARS = 2000;

/**
 * The session's stored transcript, read from the API with the session's own token; empty when there is none or it
 * cannot be read (logged): a restore that fails leaves a runtime that starts afresh, as before.
 */
/** The session's stored transcript, read from the API with the session's token; throws when it cannot be read. */
export async function storedTranscript(config: DaemonConfig): Promise<TranscriptEntry[]> {
  if (!config.apiUrl || !config.cliToken || !config.projectId || !config.sessionId) return [];
  const url = `${config.apiUrl}/projects/${encodeURIComponent(config.projectId)}/sessions/${encodeURIComponent(config.sessionId)}/transcript`;
  const res = await httpRequest("GET", url, {
    headers: { authorization: `Bearer ${config.cliToken}` },
    timeoutMs: 10_000,
  });
  if (res.status !== 200) throw new Error(`the API answered ${res.status}`);
  return Transcript.parse(JSON.parse(res.body));
}

const clip = (text: string, max: number) => (text.length > max ? `${text.slice(0, max)}\n[… cut]` : text);

function describe(entry: TranscriptEntry): string {
  if (entry.role !== "tool" || !entry.tool)
    return `--- ${entry.role === "user" ? "user" : "assistant"} ---\n${entry.text}`;
  const { name, status, input, output } = entry.tool;
  const lines = [
    `--- tool call: ${name} (${status})${entry.text ? `: ${entry.text}` : ""} ---`,
    `input: ${JSON.stringify(input)}`,
  ];
  if (output !== null) lines.push(`output:\n${clip(output, RESTORED_TOOL_OUTPUT_CHARS)}`);
  return lines.join("\n");
}

/**
 * The message that gives a restarted runtime its session's earlier conversation: the newest entries that fit,
 * oldest first, with what was left out said.
 */
export function restoredContext(entries: TranscriptEntry[], maxChars = RESTORED_MAX_CHARS): string {
  const kept: string[] = [];
  let size = 0;
  for (let i = entries.length - 1; i >= 0; i--) {
    const block = describe(entries[i]!);
    if (size + block.length > maxChars && kept.length > 0) break;
    kept.unshift(block);
    size += block.length;
  }
  const left = entries.length - kept.length;
  return [
    "svc: this session's sandbox was restarted and you with it, so your memory of it is gone. This is the " +
      "conversation so far, oldest first, restored from svc's transcript. The workspace was cloned again from " +
      "the session branch as last pushed. It is context only: there is nothing to answer until the next message.",
    ...(left > 0 ? [`(${left} earlier entries left out)`] : []),
    ...kept,
  ].join("\n\n");
}

/**
 * Seeds a new conversation of the runtime with the stored one, when the agent had already answered in it: the
 * conversation the next prompt goes to. Undefined when there is nothing to restore.
 */
export async function restoreConversation(
  client: AgentClient,
  entries: TranscriptEntry[],
): Promise<string | undefined> {
  if (!entries.some((e) => e.role !== "user")) return undefined;
  const conversation = await client.createSession("svc session");
  await client.note(conversation, restoredContext(entries));
  return conversation;
}
