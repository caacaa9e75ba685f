import { usageError } from "./errors.ts";

/**
 * dotenv parsing as the `dotenv` package does it: `export ` prefix, `#` comments (not inside quotes), single,
 * double and backtick quotes stripped, multi-line values inside quotes, `\n` expanded only in double quotes,
 * the last duplicate wins.
 */
export function parseDotenv(text: string): Record<string, string> {
  const result: Record<string, string> = {};
  const line =
    /(?:^|^)\s*(?:export\s+)?([\w.-]+)(?:\s*=\s*?|:\s+?)(\s*'(?:\\'|[^'])*'|\s*"(?:\\"|[^"])*"|\s*`(?:\\`|[^`])*`|[^#\r\n]+)?\s*(?:#.*)?(?:$|$)/gm;
  const src = text.replace(/\r\n?/g, "\n");
  for (const match of src.matchAll(line)) {
    const key = match[1]!;
    let value = (match[2] ?? "").trim();
    const quote = value[0];
    value = value.replace(/^(['"`])([\s\S]*)\1$/m, "$2");
    if (quote === '"') value = value.replace(/\\n/g, "\n").replace(/\\r/g, "\r");
    result[key] = value;
  }
  return result;
}

/**
 * One `NAME=VALUE` command-line argument (`secrets set`, `self-host env set`), split at its first `=`; the value is
 * kept as it is, the shell having done any quoting. `form` names the expected shape in the error.
 */
export function parsePair(arg: string, position: number, form = "NAME=VALUE"): [string, string] {
  const eq = arg.indexOf("=");
  // Never echo the argument: without its '=' it may be a bare secret.
  if (eq <= 0) throw usageError(`argument ${position} is not ${form}`);
  return [arg.slice(0, eq), arg.slice(eq + 1)];
}
