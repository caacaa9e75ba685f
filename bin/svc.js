#!/usr/bin/env node
// The `svc` command. Runs the bundle `npm install` builds; falls back to the TypeScript source
// (or uses it when SVC_FROM_SOURCE=1) so a checkout works before and while it is being edited.
import { existsSync } from "node:fs";

const bundle = new URL("../dist/svc.cjs", import.meta.url);
if (process.env.SVC_FROM_SOURCE !== "1" && existsSync(bundle)) {
  await import(bundle.href);
} else {
  const { register } = await import("tsx/esm/api");
  register();
  await import(new URL("../cli/main.ts", import.meta.url).href);
}
