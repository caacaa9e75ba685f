import { execFileSync } from "node:child_process";

/** The CLI tests spawn bin/svc, which runs the bundle: build it from the sources under test. */
export default function setup(): void {
  execFileSync(process.execPath, ["scripts/build.mjs"], { stdio: "inherit" });
}
