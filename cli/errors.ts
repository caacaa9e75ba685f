/** SPEC exit codes: 1 the operation failed, 2 the command line was wrong. */
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;
/** What a shell reports for a writer whose reader left (128 + SIGPIPE), as `yes | head -1` does. */
export const EXIT_SIGPIPE = 128 + 13;

/** An error meant for the user: printed as `error: <message>` and turned into the exit code. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = EXIT_FAILURE,
  ) {
    super(message);
  }
}

export const usageError = (message: string) => new CliError(message, EXIT_USAGE);
