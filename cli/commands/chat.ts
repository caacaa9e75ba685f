import { createInterface } from "node:readline";
import type { Command } from "commander";
import { AgentEvent } from "../../protocol/daemon.ts";
import { Session, SessionAbortResult, SessionList, SessionMessageAccepted } from "../../protocol/session.ts";
import { ApiRequestError } from "../api-client.ts";
import { type Context, optionsOf } from "../context.ts";
import { CliError, usageError } from "../errors.ts";
import { info } from "../output.ts";
import { projectCommand } from "../project-command.ts";
import { sessionCommand } from "../session-command.ts";
import { createSpinner } from "../spinner.ts";

type ChatOptions = { prompt?: string; new?: boolean; json?: boolean };
const READY_TIMEOUT_MS = 60_000;
/** A session just created provisions its sandbox, then its agent boots: up to about two minutes together. */
const STARTUP_WAIT_MS = 120_000;
const RETRY_MS = 500;

/** The newest live session of the project: what `svc sessions chat` talks to when no id is given. */
async function newestLive(ctx: Context, path: (suffix?: string) => string): Promise<string> {
  const { sessions } = await ctx.client.request("GET", path(), SessionList);
  const live = sessions
    .filter((s) => s.status === "running" || s.status === "provisioning")
    .sort((a, b) => b.created_at.localeCompare(a.created_at))[0];
  if (!live) throw new CliError("no running session in this project; start one with 'svc sessions new'");
  return live.session_id;
}

/**
 * Why the session cannot be talked to yet, if it is only starting: its sandbox provisioning, or its agent booting
 * (the daemon's 503). A session that failed or stopped is an error at once, with its own words.
 */
async function startingUp(ctx: Context, session: string, err: unknown): Promise<string | undefined> {
  if (!(err instanceof ApiRequestError)) return undefined;
  if (err.code === "AGENT_RUNTIME_UNAVAILABLE") return "waiting for the session's agent to start…";
  if (err.code !== "SESSION_NOT_RUNNING") return undefined;
  const s = await ctx.client.request("GET", session, Session);
  if (s.status === "provisioning") return "waiting for the session's sandbox to start…";
  // It became running between the refusal and this read: its agent is what is left to wait for.
  if (s.status === "running") return "waiting for the session's agent to start…";
  if (s.status === "failed") throw new CliError(`session ${s.session_id} failed: ${s.error ?? "no reason recorded"}`);
  return undefined;
}

/** The session's event stream once its agent is ready, waiting (with a spinner on a terminal) while it starts. */
async function connect(ctx: Context, session: string, sessionId: string) {
  const spinner = createSpinner();
  const deadline = Date.now() + STARTUP_WAIT_MS;
  try {
    for (;;) {
      const stop = new AbortController();
      const stream = ctx.client.events(`${session}/events`, stop.signal);
      const next = async (): Promise<AgentEvent> => {
        const { value, done } = await stream.next();
        if (done) throw new CliError(`the session's event stream ended; is session ${sessionId} still running?`);
        return AgentEvent.parse(value);
      };
      const ready = setTimeout(() => stop.abort(), READY_TIMEOUT_MS);
      try {
        while ((await next()).type !== "ready");
        return { next, stop };
      } catch (err) {
        stop.abort();
        const waiting = await startingUp(ctx, session, err);
        if (!waiting || Date.now() > deadline) throw err;
        spinner.update(waiting);
        await new Promise((r) => setTimeout(r, RETRY_MS));
      } finally {
        clearTimeout(ready);
      }
    }
  } finally {
    spinner.stop();
  }
}

/**
 * `svc sessions chat [<id>]`: the session named (its project found from the id alone if need be), else the
 * project's newest live one.
 */
export async function chatAction(cmd: Command, id: string | undefined): Promise<void> {
  const { prompt } = optionsOf<ChatOptions>(cmd);
  if (prompt !== undefined && !prompt.trim()) throw usageError("--prompt must not be empty");
  if (id) {
    const { opts, ctx, path } = await sessionCommand<ChatOptions>(cmd, id);
    return chat(ctx, path(), id, opts);
  }
  const { opts, ctx, path } = projectCommand<ChatOptions>(cmd, "sessions");
  const newest = await newestLive(ctx, path);
  return chat(ctx, path(`/${encodeURIComponent(newest)}`), newest, opts);
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
    if (event.type === "egress_refused") info(`  ✗ egress refused: ${event.host}:${event.port} (${event.reason})`);
  };
}

/**
 * One message with --prompt, printing the agent's reply as it streams and exiting when its run ends (1 if it
 * failed); otherwise a REPL, one message a line, where Ctrl-C aborts a running reply and Ctrl-D leaves. A session
 * still starting is waited for.
 */
async function chat(ctx: Context, session: string, sessionId: string, o: ChatOptions) {
  const { next, stop } = await connect(ctx, session, sessionId);
  const print = createPrinter(Boolean(o.json));

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
      // The sandbox's, not the conversation's: shown as it comes, whoever caused it.
      if (event.type === "egress_refused") print(event);
      if (event.type === "ready" || event.type === "egress_refused" || event.session !== conversation) continue;
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
