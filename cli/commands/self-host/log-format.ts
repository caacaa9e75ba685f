/** The API logs pino JSON lines; people read `HH:MM:SS LEVEL msg key=value…`, programs get JSON lines. */

const LEVELS: Record<number, { name: string; color: string }> = {
  10: { name: "TRACE", color: "90" },
  20: { name: "DEBUG", color: "90" },
  30: { name: "INFO", color: "32" },
  40: { name: "WARN", color: "33" },
  50: { name: "ERROR", color: "31" },
  60: { name: "FATAL", color: "35" },
};

/** pino's own fields, shown in the line's head or not at all. */
const HEAD_FIELDS = new Set(["level", "time", "msg", "pid", "hostname"]);

function parse(line: string): Record<string, unknown> | undefined {
  if (!line.startsWith("{")) return undefined;
  try {
    const value = JSON.parse(line);
    return value && typeof value === "object" && !Array.isArray(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

function fieldText(value: unknown): string {
  if (typeof value === "string") return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
  return JSON.stringify(value) ?? String(value);
}

const pad2 = (n: number) => String(n).padStart(2, "0");

/** One readable line; a line that is not pino's JSON (a crash's stack trace) stays as it is. */
export function readableLogLine(line: string, color: boolean): string {
  const entry = parse(line);
  if (!entry) return line;
  const time = typeof entry.time === "number" ? new Date(entry.time) : undefined;
  const clock = time ? `${pad2(time.getHours())}:${pad2(time.getMinutes())}:${pad2(time.getSeconds())}` : "--:--:--";
  const level = LEVELS[entry.level as number] ?? { name: String(entry.level ?? "LOG").toUpperCase(), color: "0" };
  const name = level.name.padEnd(5);
  const fields = Object.entries(entry)
    .filter(([k]) => !HEAD_FIELDS.has(k))
    .map(([k, v]) => `${k}=${fieldText(v)}`);
  const head = color ? `\x1b[2m${clock}\x1b[0m \x1b[${level.color}m${name}\x1b[0m` : `${clock} ${name}`;
  const tail = fields.length ? ` ${color ? `\x1b[2m${fields.join(" ")}\x1b[0m` : fields.join(" ")}` : "";
  return `${head} ${String(entry.msg ?? "")}${tail}`;
}

/** A JSON line as is; anything else wrapped so every line of `--json` parses. */
export function jsonLogLine(line: string): string {
  return parse(line) ? line : JSON.stringify({ msg: line });
}
