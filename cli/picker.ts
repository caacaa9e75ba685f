import { CliError, usageError } from "./errors.ts";
import { ask as askLine, Interrupted } from "./prompt.ts";

/**
 * Off a terminal nobody can answer: the command fails as a usage error (SPEC: exit 2) naming what to give instead,
 * e.g. `notInteractive("argument <name>", "svc hosts use <name>")`; `context` says first why it was asked.
 */
export function notInteractive(what: string, example: string, context?: string): CliError {
  return usageError(`${context ? `${context}: ` : ""}${what} is required when not interactive (${example})`);
}

export type Choice<T> = {
  /** What the person can type instead of the number (a host's or a project's name); also shown first. */
  key: string;
  /** More about the choice on the same line (a URL, a state). */
  detail?: string;
  value: T;
};

/**
 * The choice an answer names: its number as listed (1-based) or its key exactly; Enter alone takes the default.
 * Undefined when the answer names none of them.
 */
export function parseChoice<T>(answer: string, choices: Choice<T>[], defaultIndex?: number): number | undefined {
  const typed = answer.trim();
  if (typed === "") return defaultIndex;
  if (/^\d+$/.test(typed)) {
    const n = Number(typed);
    return n >= 1 && n <= choices.length ? n - 1 : undefined;
  }
  const byKey = choices.findIndex((c) => c.key === typed);
  return byKey >= 0 ? byKey : undefined;
}

/** The numbered list as the person sees it; `>` marks the default (the current host, the linked project). */
export function renderChoices<T>(title: string, choices: Choice<T>[], defaultIndex?: number): string {
  const number = (i: number) => `${i + 1}.`.padStart(String(choices.length).length + 1);
  const keyWidth = Math.max(...choices.map((c) => c.key.length));
  const lines = choices.map((c, i) =>
    `${i === defaultIndex ? ">" : " "} ${number(i)} ${c.key.padEnd(keyWidth)}  ${c.detail ?? ""}`.trimEnd(),
  );
  return `${title}\n${lines.join("\n")}\n`;
}

/** The question under the list: the range, and what Enter alone does. */
export function choicePrompt<T>(choices: Choice<T>[], defaultIndex?: number): string {
  const range = choices.length === 1 ? "1" : `1-${choices.length}`;
  return defaultIndex === undefined ? `Number (${range}): ` : `Number (${range}) [${defaultIndex + 1}]: `;
}

/** The person left the question (Ctrl-C, Ctrl-D): nothing is done, and the command says so. */
const cancelled = () => new CliError("cancelled; nothing changed");

/** A question at the terminal; leaving it (Ctrl-C, Ctrl-D) cancels the command. */
const ask = (question: string) =>
  askLine(question).catch((err: unknown) => {
    throw err instanceof Interrupted ? cancelled() : err;
  });

/**
 * A numbered list on stderr and a number (or a key) read from the terminal, asked again until the answer names a
 * choice. Only for an `interactive()` session: callers decide what happens off a terminal.
 */
export async function pick<T>(title: string, choices: Choice<T>[], defaultIndex?: number): Promise<T> {
  if (choices.length === 0) throw new CliError(`${title} (nothing to choose from)`);
  process.stderr.write(renderChoices(title, choices, defaultIndex));
  for (;;) {
    const chosen = parseChoice(await ask(choicePrompt(choices, defaultIndex)), choices, defaultIndex);
    if (chosen !== undefined) return choices[chosen]!.value;
    process.stderr.write(`✗ type a number from the list (1-${choices.length}) or a name from it\n`);
  }
}

/** A yes/no question whose default is no: only `y` or `yes` (any case) agrees. */
export function isYes(answer: string): boolean {
  return /^y(es)?$/i.test(answer.trim());
}

export async function confirm(question: string): Promise<boolean> {
  return isYes(await ask(`${question} [y/N] `));
}
