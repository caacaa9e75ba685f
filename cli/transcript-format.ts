import { plainText } from "../protocol/terminal-text.ts";
import type { TranscriptEntry, TranscriptTool } from "../protocol/transcript.ts";

/** A tool's output shows this many lines; the rest is counted. */
export const OUTPUT_LINES = 20;
/** A tool's input, on its one line, is cut past this many characters. */
export const INPUT_CHARS = 200;

const WHO: Record<TranscriptEntry["role"], string> = { user: "you", assistant: "agent", tool: "tool" };

const pad = (n: number) => String(n).padStart(2, "0");

/** HH:MM:SS of an ISO time, in this machine's time zone. */
export function localTime(at: string): string {
  const d = new Date(at);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** What a tool was asked, on one line: a shell tool's command, else its input as compact JSON; cut when long. */
export function toolInputLine(tool: TranscriptTool): string {
  const command = tool.input.command;
  const text = plainText(typeof command === "string" ? command : JSON.stringify(tool.input)).trim();
  const line = text.replace(/\s*\n\s*/g, " ⏎ ");
  return line.length > INPUT_CHARS ? `${line.slice(0, INPUT_CHARS)}…` : line;
}

/** Lines of text without the blank ones it starts or ends with. */
function linesOf(text: string): string[] {
  const lines = plainText(text).split("\n");
  while (lines.length > 0 && lines[lines.length - 1]!.trim() === "") lines.pop();
  while (lines.length > 0 && lines[0]!.trim() === "") lines.shift();
  return lines;
}

const indent = (line: string) => (line.trim() === "" ? "" : `  ${line}`);

function toolLines(tool: TranscriptTool): string[] {
  const out = [indent(`$ ${toolInputLine(tool)}`)];
  const output = linesOf(tool.output ?? "");
  out.push(...output.slice(0, OUTPUT_LINES).map(indent));
  if (output.length > OUTPUT_LINES) out.push(indent(`… ${output.length - OUTPUT_LINES} more lines`));
  if (tool.output_truncated) out.push(indent("(output cut at 64 KiB)"));
  return out;
}

/**
 * A session's transcript for a person, oldest first: a header line per entry (who, local time, a tool's name and
 * status), then its text indented; a tool's input on one line and the first lines of its output. Terminal escapes
 * in what the agent or its tools wrote are dropped. Empty for no entries; otherwise ends with a newline.
 */
export function formatTranscript(entries: TranscriptEntry[], options: { time?: (at: string) => string } = {}): string {
  const time = options.time ?? localTime;
  const lines: string[] = [];
  for (const entry of entries) {
    if (entry.role === "tool") {
      const name = entry.tool ? ` ${plainText(entry.tool.name)}` : "";
      lines.push(`${WHO.tool}${name}  ${time(entry.at)}${entry.tool ? `  ${entry.tool.status}` : ""}`);
      if (entry.tool) lines.push(...toolLines(entry.tool));
      else lines.push(...linesOf(entry.text).map(indent));
      continue;
    }
    lines.push(`${WHO[entry.role]}  ${time(entry.at)}`);
    lines.push(...linesOf(entry.text).map(indent));
  }
  return lines.length === 0 ? "" : `${lines.join("\n")}\n`;
}
