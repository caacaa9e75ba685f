import type { Command } from "commander";
import { Transcript } from "../../protocol/transcript.ts";
import { info, printJson } from "../output.ts";
import { sessionCommand } from "../session-command.ts";
import { formatTranscript } from "../transcript-format.ts";

/**
 * `svc sessions transcript <id>`: the session's stored conversation, oldest first, whatever the state of its
 * sandbox; the API's array itself with --json.
 */
export async function transcriptAction(cmd: Command, id: string): Promise<void> {
  const { opts, ctx, path } = await sessionCommand(cmd, id);
  const entries = await ctx.client.request("GET", path("/transcript"), Transcript);
  if (opts.json) return printJson(entries);
  if (entries.length === 0) return info("no transcript entries yet");
  process.stdout.write(formatTranscript(entries));
}
