import { createInterface } from "node:readline";
import { AgentEvent } from "../../protocol/daemon.ts";
import { SessionAbortResult, SessionList, SessionMessageAccepted } from "../../protocol/session.ts";
import type { Context } from "../context.ts";
import { CliError, usageError } from "../errors.ts";
import { info } from "../output.ts";

type ChatOptions = { prompt?: string; new?: boolean; json?: boolean };
const READY_TIMEOUT_MS = 60_000;

/** The newest running session of the project: what `svc sessions chat` talks to when no id is given. */
async function newestRunning(ctx: Context, path: (suffix?: string) => string): Promise<string> {
  const { sessions } = await ctx.client.request("GET", path(), SessionList);
  const running = sessions
    .filter((s) => s.status === "running")
    .sort((a, b) => b.created_at.localeCompare(a.created_at))[0];
  if (!running) throw new CliError("no running session in this project; start one with 'svc sessions new'");
  return running.session_id;
}

/**
 * Prints one event for a person: the agent's words on stdout, its tool use on stderr. A run's error is its outcome,
 * not a line of it: the caller reports it (the REPL carries on, a single --prompt fails with it).
 */
function createPrinter(json: boolean) {
  let midLine = false;
  return (event: AgentEvent) => {
    if (json) {
      process.stdout.write(`${JSON.stringify(event)}\n`);
      return;
    }
    if (event.type === "text") {
      process.stdout.write(event.delta);
      midLine = !event.delta.endsWith("\n");
    } else if ((event.type === "idle" || event.type === "error") && midLine) {
      process.stdout.write("\n");
      midLine = false;
    }
    if (event.type === "tool" && event.status !== "running") {
      info(`  ${event.status === "completed" ? "✓" : "✗"} ${event.tool}${event.title ? `: ${event.title}` : ""}`);
    }
  };
}

/**
 * `svc sessions chat [<id>] [--prompt] [--new]` (alias `talk`): one message with --prompt, printing the agent's
 * reply as it streams and exiting when its run ends (1 if it failed); otherwise a REPL, one message a line, where
 * Ctrl-C aborts a running reply and Ctrl-D leaves.
 */
export async function chat(ctx: Context, path: (suffix?: string) => string, id: string | undefined, o: ChatOptions) {
  if (o.prompt !== undefined && !o.prompt.trim()) throw usageError("--prompt must not be empty");
  const sessionId = id ?? (await newestRunning(ctx, path));
  const session = path(`/${encodeURIComponent(sessionId)}`);
  const stop = new AbortController();
  const stream = ctx.client.events(`${session}/events`, stop.signal);
  const next = async (): Promise<AgentEvent> => {
    const { value, done } = await stream.next();
    if (done) throw new CliError(`the session's event stream ended; is session ${sessionId} still running?`);
    return AgentEvent.parse(value);
  };
  const print = createPrinter(Boolean(o.json));

  const ready = setTimeout(() => stop.abort(), READY_TIMEOUT_MS);
  try {
    while ((await next()).type !== "ready");
  } catch (err) {
    stop.abort();
    throw err;
  } finally {
    clearTimeout(ready);
  }

  let fresh = Boolean(o.new);
  /** Sends one message and prints its run; the run's error message when it failed. */
  async function exchange(text: string): Promise<string | undefined> {
    const { conversation } = await ctx.client.request("POST", `${session}/messages`, SessionMessageAccepted, {
      body: { text, ...(fresh ? { new: true } : {}) },
    });
    fresh = false;
    // The end of an earlier run (an aborted one's `idle` comes late) must not end this one.
    let started = false;
    for (;;) {
      const event = await next();
      if (event.type === "ready" || event.session !== conversation) continue;
      if (event.type === "busy") started = true;
      if (!started) continue;
      print(event);
      if (event.type === "idle") return undefined;
      if (event.type === "error") return event.message;
    }
  }

  try {
    if (o.prompt !== undefined) {
      // Thrown, not a side channel: the CLI's entry turns it into `error: <message>` and exit 1.
      const failure = await exchange(o.prompt);
      if (failure !== undefined) throw new CliError(failure);
      return;
    }
    await repl(ctx, session, exchange);
  } finally {
    stop.abort();
  }
}

async function repl(
  ctx: Context,
  session: string,
  exchange: (text: string) => Promise<string | undefined>,
): Promise<void> {
  const lines = createInterface({ input: process.stdin, terminal: process.stdin.isTTY });
  const ask = () => process.stdin.isTTY && process.stderr.write("you> ");
  let running = false;
  lines.on("SIGINT", () => {
    if (!running) return lines.close();
    void ctx.client.request("POST", `${session}/abort`, SessionAbortResult).then(
      () => info("(aborted)"),
      (err: Error) => info(`could not abort: ${err.message}`),
    );
  });
  if (process.stdin.isTTY) info("talking to the session's agent; Ctrl-C stops a reply, Ctrl-D leaves");
  ask();
  for await (const line of lines) {
    const text = line.trim();
    if (text) {
      running = true;
      const failure = await exchange(text);
      running = false;
      if (failure !== undefined) info(`error: ${failure}`);
    }
    ask();
  }
}
