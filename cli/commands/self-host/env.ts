import { usageError } from "../../errors.ts";
import { printJson, printLine } from "../../output.ts";
import { ensureState, selfHostPaths, writeState } from "./state.ts";

const KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;
const SECRET_NAME = /KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|PRIVATE|DATABASE_URL/i;

function maskValue(key: string, value: string): string {
  if (!SECRET_NAME.test(key) || value === "") return value;
  return value.length <= 8 ? "********" : `${value.slice(0, 3)}…${"*".repeat(5)}`;
}

export function envList(options: { json?: boolean }): void {
  const state = ensureState(selfHostPaths());
  const entries = Object.entries(state.env)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([key, value]) => ({ key, value: maskValue(key, value), secret: SECRET_NAME.test(key) }));
  if (options.json) {
    printJson(entries);
    return;
  }
  for (const e of entries) printLine(`${e.key}=${e.value}`);
}

export function envSet(pairs: string[]): void {
  const parsed = pairs.map((pair, i) => {
    const eq = pair.indexOf("=");
    // Never echo the argument: without its '=' it may be a bare secret.
    if (eq <= 0) throw usageError(`argument ${i + 1} is not KEY=VALUE`);
    const key = pair.slice(0, eq);
    if (!KEY.test(key)) throw usageError(`'${key}' is not a valid variable name`);
    return [key, pair.slice(eq + 1)] as const;
  });
  if (parsed.length === 0) throw usageError("give at least one KEY=VALUE");
  const paths = selfHostPaths();
  const state = ensureState(paths);
  for (const [key, value] of parsed) {
    if (value === "") delete state.env[key];
    else state.env[key] = value;
  }
  writeState(paths, state);
  process.stderr.write(`✓ saved ${parsed.map(([k]) => k).join(", ")}; applied at the next 'svc self-host start'\n`);
}
