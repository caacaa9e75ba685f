import { Command } from "commander";
import {
  DEFAULT_PREVIEW_PORT,
  MODEL_SETUP_COMMAND,
  PROJECT_MODEL_COMMAND,
  RUNTIME_PROVIDER_KEYS,
  SandboxEnv,
} from "../../protocol/env.ts";
import { ApiHealth } from "../../protocol/health.ts";
import { PreviewLink } from "../../protocol/preview.ts";
import { SecretList } from "../../protocol/secret.ts";
import { Session, SessionList } from "../../protocol/session.ts";
import type { Context } from "../context.ts";
import { openDashboard } from "../dashboard-link.ts";
import { CliError, usageError } from "../errors.ts";
import { parsePort } from "../flag-parsers.ts";
import { info, printJson, printLine, warn } from "../output.ts";
import { projectCommand, projectOption } from "../project-command.ts";
import { sessionCommand } from "../session-command.ts";
import { printTable } from "../table.ts";
import { chatAction } from "./chat.ts";
import { addSandboxAccess } from "./sandbox-access.ts";
import { waitUntilRunning } from "./session-wait.ts";
import { transcriptAction } from "./transcript.ts";

type NewOptions = { prompt?: string; agent?: string; model?: string; base?: string; wait: boolean };

/** Whether the project's secrets name a model of its own (a gateway, or a key of the runtime's own providers). */
async function hasOwnModel(client: Context["client"], secretsPath: string): Promise<boolean> {
  const { secrets } = await client.request("GET", secretsPath, SecretList);
  const own = [SandboxEnv.llmBaseUrl, ...Object.keys(RUNTIME_PROVIDER_KEYS)];
  return secrets.some((s) => own.includes(s.name));
}

function printSession(s: Session): void {
  printLine(
    [
      `session ${s.session_id}`,
      `status:   ${s.status}`,
      `branch:   ${s.branch}`,
      `base:     ${s.base_ref}`,
      `agent:    ${s.agent_name}${s.agent_model ? ` (${s.agent_model})` : ""}`,
      `sandbox:  ${s.sandbox_url ?? "-"}`,
      `trigger:  ${s.trigger ?? "-"}`,
      `error:    ${s.error ?? "-"}`,
    ].join("\n"),
  );
}

export function sessionsCommand(): Command {
  const sessions = new Command("sessions").description("agent sessions, each in its own sandbox");
  const withProject = (c: Command) => c.addOption(projectOption()).option("--json", "output JSON");

  withProject(sessions.command("ls").description("all sessions of the project")).action(async (_o, cmd: Command) => {
    const { opts, ctx, path } = projectCommand(cmd, "sessions");
    const { sessions: list } = await ctx.client.request("GET", path(), SessionList);
    if (opts.json) return printJson(list);
    if (list.length === 0) return info("no sessions yet: 'svc sessions new'");
    printTable(
      list.map((s) => [s.session_id, s.status, s.base_ref, s.agent_name, s.trigger ?? "-", s.created_at]),
      { header: ["SESSION", "STATUS", "BASE", "AGENT", "TRIGGER", "CREATED"] },
    );
  });

  withProject(
    sessions
      .command("info")
      .aliases(["show", "view"])
      .description("status, branch, base ref, agent, sandbox URL, errors")
      .argument("<id>"),
  ).action(async (id: string, _o, cmd: Command) => {
    const { opts, ctx, path } = await sessionCommand(cmd, id);
    const s = await ctx.client.request("GET", path(), Session);
    if (opts.json) return printJson(s);
    printSession(s);
  });

  withProject(
    sessions
      .command("new")
      .description("start a session (prints its id)")
      .option("--prompt <text>", "first prompt for the agent")
      .option("--agent <name>", "agent to start with")
      .option("--model <model>", "model to run")
      .option("--base <ref>", "branch to start from (default: the project's default branch)")
      .option("--no-wait", "return at once instead of waiting until the sandbox is running"),
  ).action(async (_o, cmd: Command) => {
    const { opts: o, ctx, path } = projectCommand<NewOptions>(cmd, "sessions");
    if (o.prompt !== undefined && !o.prompt.trim()) throw usageError("--prompt must not be empty");
    let s = await ctx.client.request("POST", path(), Session, {
      body: { prompt: o.prompt, agent: o.agent, model: o.model, base_ref: o.base },
    });
    const health = await ctx.client.request("GET", "/health", ApiHealth);
    if (health.model_configured === false && !(await hasOwnModel(ctx.client, projectCommand(cmd, "secrets").path()))) {
      warn(
        `no model is configured: the agent cannot answer until one is; run '${MODEL_SETUP_COMMAND}', or for this ` +
          `project '${PROJECT_MODEL_COMMAND}'`,
      );
    }
    if (o.wait)
      s = await waitUntilRunning(s, (query) => ctx.client.request("GET", path(`/${s.session_id}`), Session, { query }));
    if (o.json) printJson(s);
    else printLine(s.session_id);
    if (s.status === "failed") throw new CliError(`session ${s.session_id} failed: ${s.error}`);
    if (o.wait) info(`✓ session ${s.session_id} is ${s.status}`);
  });

  for (const [verb, describe, done] of [
    ["restart", "re-provision in place (fresh sandbox and token)", "restarting"],
    ["stop", "stop the sandbox; the branch and record stay", "stopped"],
  ] as const) {
    withProject(sessions.command(verb).description(describe).argument("<id>")).action(
      async (id: string, _o, cmd: Command) => {
        const { opts, ctx, path } = await sessionCommand(cmd, id);
        const s = await ctx.client.request("POST", path(`/${verb}`), Session);
        if (opts.json) return printJson(s);
        info(`✓ session ${s.session_id} ${done}`);
      },
    );
  }

  withProject(
    sessions.command("rm").description("stop and delete (the branch and its CRs stay)").argument("<id>"),
  ).action(async (id: string, _o, cmd: Command) => {
    const { opts, ctx, path } = await sessionCommand(cmd, id);
    await ctx.client.request("DELETE", path(), Session.optional());
    if (opts.json) return printJson({ session_id: id, removed: true });
    info(`✓ session ${id} removed`);
  });

  sessions
    .command("open")
    .description("sign a browser in to the dashboard on the session's page")
    .argument("<id>")
    .addOption(projectOption())
    .option("--json", "output JSON: {url}")
    .action(async (id: string, _o, cmd: Command) => {
      const { opts, ctx, path } = await sessionCommand(cmd, id, { quiet: true });
      // An unknown session fails here, before any link is made or browser opened.
      const session = await ctx.client.request("GET", path(), Session);
      await openDashboard(ctx, `/dashboard/projects/${session.project_id}/sessions/${session.session_id}`, opts);
    });

  withProject(
    sessions
      .command("chat")
      .alias("talk")
      .description("talk to a session's agent: a REPL, or one message with --prompt")
      .argument("[id]", "session id (default: the project's newest running session)")
      .option("--prompt <text>", "send one message, print the reply as it streams, exit")
      .option("--new", "start a new conversation with the agent instead of continuing"),
  ).action(async (id: string | undefined, _o, cmd: Command) => chatAction(cmd, id));

  withProject(
    sessions
      .command("transcript")
      .description("the session's conversation so far: messages, answers, tool calls with their output")
      .argument("<id>"),
  ).action(async (id: string, _o, cmd: Command) => transcriptAction(cmd, id));

  withProject(
    sessions
      .command("preview")
      .description(`print a preview URL for a sandbox port (default ${DEFAULT_PREVIEW_PORT}), valid for an hour`)
      .argument("<id>")
      .argument("[port]", "sandbox port", parsePort, DEFAULT_PREVIEW_PORT),
  ).action(async (id: string, port: number, _o, cmd: Command) => {
    const { opts, ctx, path } = await sessionCommand(cmd, id);
    const link = await ctx.client.request("POST", path("/previews"), PreviewLink, {
      body: { port },
    });
    if (opts.json) return printJson(link);
    printLine(link.url);
  });

  addSandboxAccess(sessions);
  return sessions;
}
