/** The wizard's kinds of question, each answered into selfhost.json at once. */
import { createPrivateKey } from "node:crypto";
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { type StackSetting, stackSetting } from "../../../protocol/stack-settings.ts";
import { info } from "../../output.ts";
import { ask, askSecret } from "../../prompt.ts";
import { settingProblem } from "./env.ts";
import { maskSetting } from "./settings.ts";
import { type SelfHostPaths, type SelfHostState, writeState } from "./state.ts";

export type Answers = { paths: SelfHostPaths; state: SelfHostState };

/** Written as soon as given, so Ctrl-C at a later question keeps it; undefined removes the key. */
export function save(answers: Answers, changes: Record<string, string | undefined>): void {
  for (const [key, value] of Object.entries(changes)) {
    if (value === undefined) delete answers.state.env[key];
    else answers.state.env[key] = value;
  }
  writeState(answers.paths, answers.state);
}

function catalogued(key: string): StackSetting {
  const setting = stackSetting(key);
  if (!setting) throw new Error(`${key} is not in protocol/stack-settings.ts`);
  return setting;
}

/** What Enter keeps: the current value (masked when secret), else the default, else nothing. */
function shown(setting: StackSetting, current: string | undefined): string {
  if (current !== undefined) return ` [${maskSetting(setting, setting.key, current)}]`;
  const fallback = setting.schema.safeParse(undefined);
  return fallback.success && fallback.data !== undefined ? ` [${String(fallback.data)}]` : "";
}

const refuse = (why: string) => info(`    ✗ ${why}`);

/** One setting, checked with the catalogue's validator and asked again with the reason until it passes. */
export async function askSetting(answers: Answers, key: string, label: string): Promise<void> {
  const setting = catalogued(key);
  for (;;) {
    const current = answers.state.env[key];
    const question = `  ${label}${shown(setting, current)}: `;
    const value = setting.secret ? await askSecret(question) : await ask(question);
    if (value === "") return;
    const problem = settingProblem(setting, value);
    if (!problem) return save(answers, { [key]: value });
    refuse(problem);
  }
}

/** One of a few words; Enter keeps `current`. */
export async function askChoice(label: string, choices: string[], current: string): Promise<string> {
  for (;;) {
    const value = (await ask(`  ${label} (${choices.join("/")}) [${current}]: `)).toLowerCase();
    if (value === "") return current;
    if (choices.includes(value)) return value;
    refuse(`answer one of: ${choices.join(", ")}`);
  }
}

/** A PEM file's path, whose content (not the path: the file may move) is stored as the secret setting. */
export async function askPrivateKeyFile(answers: Answers, key: string, label: string): Promise<void> {
  const setting = catalogued(key);
  for (;;) {
    const current = answers.state.env[key];
    const path = await ask(`  ${label}${current === undefined ? "" : " [a key is stored; Enter keeps it]"}: `);
    if (path === "") return;
    let pem: string;
    try {
      pem = readFileSync(path.replace(/^~(?=\/)/, homedir()), "utf8");
    } catch (err) {
      refuse(`cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
      continue;
    }
    const problem = settingProblem(setting, pem);
    if (problem) {
      refuse(problem.replace(key, path));
      continue;
    }
    try {
      createPrivateKey(pem);
    } catch {
      refuse(`${path} holds no private key this machine can read`);
      continue;
    }
    return save(answers, { [key]: pem });
  }
}
