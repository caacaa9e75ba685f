import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import type { Duplex } from "node:stream";
import type { Command } from "commander";
import { createFrameReader, EXEC_UPGRADE, ExecExit, encodeFrame, Frame } from "../../protocol/sandbox-access.ts";
import type { Context } from "../context.ts";
import { CliError, usageError } from "../errors.ts";
import { parsePositiveInt } from "../flag-parsers.ts";
import { printLogLines } from "../log-lines.ts";
import { projectOption } from "../project-command.ts";
import { sessionCommand } from "../session-command.ts";

/** `svc sessions logs <id> [-f] [--tail N] [--json]`: the sandbox's own output (entrypoint, daemon, agent). */
async function logs(cmd: Command, id: string): Promise<void> {
  const { opts, ctx, path } = await sessionCommand<{ follow?: boolean; tail?: number }>(cmd, id);
  await printLogLines(ctx, path("/logs"), opts);
}

type Exec = { cmd: string[]; tty: boolean };

/** Opens the exec connection (protocol/sandbox-access.ts); an API refusal becomes the usual error. */
function connect(ctx: Context, path: string, exec: Exec): Promise<Duplex> {
  const url = new URL(`${ctx.client.baseUrl}${path}`);
  for (const arg of exec.cmd) url.searchParams.append("cmd", arg);
  if (exec.tty) {
    url.searchParams.set("tty", "1");
    if (process.stdout.columns) url.searchParams.set("cols", String(process.stdout.columns));
    if (process.stdout.rows) url.searchParams.set("rows", String(process.stdout.rows));
    if (process.env.TERM && /^[\w.+-]{1,64}$/.test(process.env.TERM)) url.searchParams.set("term", process.env.TERM);
  }
  // A tty always takes the keyboard; otherwise stdin goes along when it is piped or redirected, not a terminal.
  if (exec.tty || !process.stdin.isTTY) url.searchParams.set("stdin", "1");
  const request = url.protocol === "https:" ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = request(url, {
      headers: { connection: "Upgrade", upgrade: EXEC_UPGRADE, authorization: `Bearer ${ctx.client.token}` },
    });
    req.on("upgrade", (_res, socket, head) => {
      if (head.length) socket.unshift(head);
      resolve(socket);
    });
    req.on("response", (res: IncomingMessage) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => {
        text += c;
      });
      res.on("end", () => {
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {}
        reject(ctx.client.failure({ status: res.statusCode ?? 500 }, json));
      });
    });
    req.on("error", (err) => reject(new CliError(`cannot reach ${ctx.client.baseUrl}: ${err.message}`)));
    req.end();
  });
}

/**
 * Runs a command in the sandbox: its stdout and stderr to ours, our stdin to it when attached, a tty's size
 * along; resolves with its exit code.
 */
async function run(ctx: Context, path: string, exec: Exec): Promise<number> {
  const socket = await connect(ctx, path, exec);
  const stdin = process.stdin;
  const raw = exec.tty && stdin.isTTY;
  if (raw) stdin.setRawMode(true);
  const onInput = (data: Buffer) => socket.write(encodeFrame(Frame.STDIN, data));
  const onEnd = () => socket.write(encodeFrame(Frame.STDIN_EOF));
  const onResize = () =>
    socket.write(
      encodeFrame(Frame.RESIZE, JSON.stringify({ cols: process.stdout.columns, rows: process.stdout.rows })),
    );
  const attached = exec.tty || !stdin.isTTY;
  if (attached) {
    stdin.on("data", onInput);
    stdin.once("end", onEnd);
  }
  if (exec.tty) process.stdout.on("resize", onResize);
  try {
    return await new Promise<number>((resolve, reject) => {
      const read = createFrameReader();
      socket.on("data", (chunk: Buffer) => {
        for (const { kind, payload } of read(chunk)) {
          if (kind === Frame.STDOUT && !process.stdout.write(payload)) {
            socket.pause();
            process.stdout.once("drain", () => socket.resume());
          } else if (kind === Frame.STDERR) process.stderr.write(payload);
          else if (kind === Frame.EXIT) resolve(ExecExit.parse(JSON.parse(payload.toString())).code);
          else if (kind === Frame.ERROR) reject(new CliError(JSON.parse(payload.toString()).error));
        }
      });
      socket.on("error", (err) => reject(new CliError(`the connection to the sandbox broke: ${err.message}`)));
      socket.on("close", () => reject(new CliError("the connection to the sandbox closed before the command ended")));
    });
  } finally {
    stdin.off("data", onInput);
    stdin.off("end", onEnd);
    process.stdout.off("resize", onResize);
    if (raw) stdin.setRawMode(false);
    // The command is over: nothing more is read from our stdin, which would otherwise keep the CLI alive.
    stdin.destroy();
    socket.destroy();
  }
}

/** A command's exit code that is not 0 becomes the CLI's, without a message of ours: the command said its own. */
function exitWith(code: number): void {
  if (code !== 0) throw new CliError("", code > 0 && code < 256 ? code : 1);
}

/** `svc sessions logs`, `exec` and `shell`, added to the `sessions` command. */
export function addSandboxAccess(sessions: Command): void {
  sessions
    .command("logs")
    .description("the sandbox's log: entrypoint, daemon and agent output")
    .argument("<id>")
    .option("-f, --follow", "keep printing new lines until the sandbox stops or Ctrl-C")
    .option("--tail <n>", "only the last n lines so far", parsePositiveInt)
    .addOption(projectOption())
    .option("--json", "one JSON object a line: {stream, line}")
    .action((id: string, _o, cmd: Command) => logs(cmd, id));

  sessions
    .command("exec")
    .description("run a command in the sandbox's workspace: svc sessions exec <id> -- <cmd> [args...]")
    .argument("<id>")
    .argument("<cmd...>", "the command and its arguments, after --")
    .addOption(projectOption())
    .action(async (id: string, command: string[], _o, cmd: Command) => {
      const { ctx, path } = await sessionCommand(cmd, id);
      exitWith(await run(ctx, path("/exec"), { cmd: command, tty: false }));
    });

  sessions
    .command("shell")
    .description("an interactive shell in the sandbox's workspace")
    .argument("<id>")
    .addOption(projectOption())
    .action(async (id: string, _o, cmd: Command) => {
      if (!process.stdin.isTTY || !process.stdout.isTTY) {
        throw usageError(
          `svc sessions shell needs a terminal; to run a command without one: svc sessions exec ${id} -- <cmd>`,
        );
      }
      const { ctx, path } = await sessionCommand(cmd, id);
      exitWith(await run(ctx, path("/exec"), { cmd: ["bash"], tty: true }));
    });
}
