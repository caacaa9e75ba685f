import { printVersion, versionAsked } from "./commands/version.ts";

/**
 * `svc git-credential get|store|erase` as git runs it (the helper `svc ship` sets up), for every fetch and push to an
 * svc host: answered without the command parser and its commands (0.064 CPU-s a run against 0.089). Anything else
 * goes through the parser.
 */
function gitCredentialAsked(args: string[]): string | undefined {
  const [word, operation, ...rest] = args;
  if (word !== "git-credential" || rest.length > 0) return undefined;
  return operation === "get" || operation === "store" || operation === "erase" ? operation : undefined;
}

async function main(argv: string[]): Promise<number> {
  const args = argv.slice(2);
  // `svc version` alone needs neither the command parser nor any command (cli/run.ts): start-up is all it costs.
  const version = versionAsked(args);
  if (version) {
    printVersion(version);
    return 0;
  }
  const operation = gitCredentialAsked(args);
  if (operation) return (await import("./git-credential-helper.ts")).runGitCredentialHelper(operation);
  return (await import("./run.ts")).run(argv);
}

// The one place the exit code is set: commands report failure by throwing, never through process.exitCode. No
// top-level await: the bundle of this file is CommonJS (scripts/build.mjs).
main(process.argv).then((code) => {
  process.exitCode = code;
});
