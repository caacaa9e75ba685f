import { printVersion, versionAsked } from "./commands/version.ts";

async function main(argv: string[]): Promise<number> {
  // `svc version` alone needs neither the command parser nor any command (cli/run.ts): start-up is all it costs.
  const version = versionAsked(argv.slice(2));
  if (!version) return (await import("./run.ts")).run(argv);
  printVersion(version);
  return 0;
}

// The one place the exit code is set: commands report failure by throwing, never through process.exitCode. No
// top-level await: the bundle of this file is CommonJS (scripts/build.mjs).
main(process.argv).then((code) => {
  process.exitCode = code;
});
