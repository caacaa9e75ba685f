import { VERSION } from "../../protocol/version.ts";
import { printJson, printLine } from "../output.ts";

export function printVersion(options: { json?: boolean }): void {
  if (options.json) printJson({ version: VERSION });
  else printLine(VERSION);
}

/**
 * `svc version [--json]`, `svc --version`, `svc -v`, alone on the line: answered before the command parser loads,
 * since a script that checks the CLI's version should not pay for the parser (half of `svc version`'s start-up).
 * Anything more on the line goes through the parser, which says what is wrong with it.
 */
export function versionAsked(args: string[]): { json: boolean } | undefined {
  const [word, ...rest] = args;
  if ((word === "--version" || word === "-v") && rest.length === 0) return { json: false };
  if (word !== "version") return undefined;
  if (rest.length === 0) return { json: false };
  if (rest.length === 1 && rest[0] === "--json") return { json: true };
  return undefined;
}
