import { CommanderError } from "commander";
import { CliError, EXIT_FAILURE, EXIT_USAGE } from "./errors.ts";
import { buildProgram } from "./program.ts";

/** Help and version are successes; every other commander complaint is a usage error (SPEC: exit 2). */
const SUCCESS_CODES = new Set(["commander.helpDisplayed", "commander.help", "commander.version"]);

function exitOverrideAll(cmd: ReturnType<typeof buildProgram>): void {
  cmd.exitOverride();
  for (const sub of cmd.commands) exitOverrideAll(sub);
}

async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  exitOverrideAll(program);
  try {
    await program.parseAsync(argv);
    return 0;
  } catch (err) {
    if (err instanceof CommanderError) return SUCCESS_CODES.has(err.code) ? 0 : EXIT_USAGE;
    if (err instanceof CliError) {
      process.stderr.write(`error: ${err.message}\n`);
      return err.exitCode;
    }
    process.stderr.write(`error: ${(err as Error)?.message ?? String(err)}\n`);
    if (process.env.SVC_DEBUG) process.stderr.write(`${(err as Error)?.stack}\n`);
    return EXIT_FAILURE;
  }
}

// The one place the exit code is set: commands report failure by throwing, never through process.exitCode.
process.exitCode = await main(process.argv);
