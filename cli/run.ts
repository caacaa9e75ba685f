import { type Command, CommanderError } from "commander";
import { plainText } from "../protocol/terminal-text.ts";
import { readCliEnv } from "./config.ts";
import { CliError, EXIT_FAILURE, EXIT_SIGPIPE, EXIT_USAGE } from "./errors.ts";
import { buildProgram } from "./program.ts";

/** Help and version are successes; every other commander complaint is a usage error (SPEC: exit 2). */
const SUCCESS_CODES = new Set(["commander.helpDisplayed", "commander.help", "commander.version"]);

function exitOverrideAll(cmd: Command): void {
  cmd.exitOverride();
  for (const sub of cmd.commands) exitOverrideAll(sub);
}

/** Parses and runs one command line; the exit code, never thrown. */
export async function run(argv: string[]): Promise<number> {
  // A reader that stops early (`svc self-host env ls | head -1`) ends the output as it ends any Unix tool's: quietly,
  // with SIGPIPE's status, never an unhandled EPIPE and its stack trace.
  process.stdout.on("error", (err: NodeJS.ErrnoException) => {
    if (err.code !== "EPIPE") throw err;
    process.exit(EXIT_SIGPIPE);
  });
  const program = await buildProgram(argv.slice(2));
  exitOverrideAll(program);
  try {
    await program.parseAsync(argv);
    return 0;
  } catch (err) {
    if (err instanceof CommanderError) return SUCCESS_CODES.has(err.code) ? 0 : EXIT_USAGE;
    if (err instanceof CliError) {
      // Messages may quote a sandbox's or Docker's output: a pipe gets it without escape sequences.
      let message = process.stderr.isTTY ? err.message : plainText(err.message);
      // Each self-host mode keeps its own data: a project unknown here may be the other mode's (loaded only then).
      if ((err as { code?: unknown }).code === "PROJECT_NOT_FOUND") {
        const { projectElsewhereHint } = await import("./commands/self-host/mode-switch.ts");
        message += await projectElsewhereHint(program.opts<{ host?: string }>().host);
      }
      // No message: a command run elsewhere (`sessions exec`) said its own and passes its exit code on.
      if (message) process.stderr.write(`error: ${message}\n`);
      return err.exitCode;
    }
    process.stderr.write(`error: ${(err as Error)?.message ?? String(err)}\n`);
    if (readCliEnv().debug) process.stderr.write(`${(err as Error)?.stack}\n`);
    return EXIT_FAILURE;
  }
}
