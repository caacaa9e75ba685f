import { STACK_SETTINGS, type StackSetting, stackSetting } from "../../../protocol/stack-settings.ts";
import { parsePair } from "../../dotenv.ts";
import { usageError } from "../../errors.ts";
import { info, printJson, warn } from "../../output.ts";
import { printTable } from "../../table.ts";
import { runningMode } from "./running-mode.ts";
import { maskSetting, nearestSetting } from "./settings.ts";
import { ensureState, selfHostPaths, writeState } from "./state.ts";

const KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;

const KIND_TEXT = {
  url: "a URL",
  integer: "a whole number",
  number: "a number",
  choice: "one of its choices",
  text: "a text",
  secret: "a secret",
} as const;

type EnvEntry = {
  key: string;
  value: string | null;
  set: boolean;
  known: boolean;
  secret: boolean;
  kind: string | null;
  meaning: string | null;
  default: string | null;
};

function defaultOf(key: string): string | null {
  const parsed = stackSetting(key)?.schema.safeParse(undefined);
  return parsed?.success && parsed.data !== undefined ? String(parsed.data) : null;
}

/** The settings `env set` takes (not those `start` sets itself), then any other key stored. */
function entries(env: Record<string, string>): EnvEntry[] {
  const known = STACK_SETTINGS.filter((s) => !s.managedBy).map((s): EnvEntry => {
    const value = env[s.key];
    return {
      key: s.key,
      value: value === undefined ? null : maskSetting(s, s.key, value),
      set: value !== undefined,
      known: true,
      secret: s.secret,
      kind: s.kind,
      meaning: s.meaning,
      default: defaultOf(s.key),
    };
  });
  const unknown = Object.entries(env)
    .filter(([key]) => !stackSetting(key))
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([key, value]): EnvEntry => {
      const shown = maskSetting(undefined, key, value);
      return {
        key,
        value: shown,
        set: true,
        known: false,
        secret: shown !== value,
        kind: null,
        meaning: null,
        default: null,
      };
    });
  return [...known, ...unknown];
}

export function envList(options: { json?: boolean }): void {
  const list = entries(ensureState(selfHostPaths()).env);
  if (options.json) {
    printJson(list);
    return;
  }
  printTable(
    list.map((e) => [
      e.key,
      e.set ? e.value! : e.default === null ? "unset" : `unset (default ${e.default})`,
      e.meaning ?? "not a setting svc knows: passed to the stack's environment as is",
    ]),
    { header: ["KEY", "VALUE", "MEANING"] },
  );
}

function parsePairs(pairs: string[]): [string, string][] {
  if (pairs.length === 0) throw usageError("give at least one KEY=VALUE");
  return pairs.map((pair, i) => {
    const [key, value] = parsePair(pair, i + 1, "KEY=VALUE");
    if (!KEY.test(key)) throw usageError(`'${key}' is not a valid variable name`);
    return [key, value];
  });
}

/** Why a value does not pass the setting's validator (the API's own), never quoting a secret; undefined if it does. */
export function settingProblem(setting: StackSetting, value: string): string | undefined {
  const parsed = setting.schema.safeParse(value);
  if (parsed.success) return undefined;
  const got = setting.secret ? "" : ` (got '${value}')`;
  const issue = parsed.error.issues[0];
  const why = issue && issue.code !== "invalid_type" ? `: ${issue.message}` : "";
  return `${setting.key} must be ${KIND_TEXT[setting.kind]}${why}${got}`;
}

/** A known key's value must pass the API's own validator; an unknown key is kept, with a warning. */
function check(key: string, value: string): string | undefined {
  const setting = stackSetting(key);
  if (!setting) {
    const near = nearestSetting(key);
    return `${key} is not a setting svc knows${near ? ` (did you mean ${near}?)` : ""}; saved anyway`;
  }
  if (setting.managedBy) throw usageError(`${key} is not set with env set: it comes from ${setting.managedBy}`);
  if (value === "") return undefined;
  const problem = settingProblem(setting, value);
  if (problem) throw usageError(problem);
  return undefined;
}

export async function envSet(pairs: string[], options: { json?: boolean }): Promise<void> {
  const parsed = parsePairs(pairs);
  const warnings = parsed.flatMap(([key, value]) => check(key, value) ?? []);
  const paths = selfHostPaths();
  const state = ensureState(paths);
  for (const [key, value] of parsed) {
    if (value === "") delete state.env[key];
    else state.env[key] = value;
  }
  writeState(paths, state);
  // Embedded (its process) or compose (its containers): either way the stack read its settings when it started.
  const running = (await runningMode(paths)) !== undefined;
  const saved = parsed.filter(([, v]) => v !== "").map(([k]) => k);
  const removed = parsed.filter(([, v]) => v === "").map(([k]) => k);
  for (const w of warnings) warn(w);
  if (options.json) printJson({ saved, removed, warnings, restart_needed: running });
  const what = [saved.length ? `saved ${saved.join(", ")}` : "", removed.length ? `removed ${removed.join(", ")}` : ""];
  info(
    `✓ ${what.filter(Boolean).join("; ")}; ${running ? "run 'svc self-host restart' to apply" : "applied at the next 'svc self-host start'"}`,
  );
}
