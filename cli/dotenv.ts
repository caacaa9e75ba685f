import { parse } from "dotenv";
import { usageError } from "./errors.ts";

/** The dotenv file `svc env pull` writes and `svc env push` reads when no path is given: the current directory's. */
export const DOTENV_FILE = ".env";

/**
 * A dotenv file's variables (`secrets set --from-file`), as the `dotenv` package parses them: `export ` prefix, `#`
 * comments (not inside quotes), single, double and backtick quotes stripped, multi-line values inside quotes, `\n`
 * expanded only in double quotes, the last duplicate wins.
 */
export function parseDotenv(text: string): Record<string, string> {
  return parse(text);
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
