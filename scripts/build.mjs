// Bundles the programs into dist/ (fast start-up; dependencies stay in node_modules) and copies the SQL migrations.
import { cpSync, rmSync } from "node:fs";
import { build } from "esbuild";

const root = new URL("../", import.meta.url);
rmSync(new URL("dist/", root), { recursive: true, force: true });
await build({
  absWorkingDir: root.pathname,
  entryPoints: { svc: "cli/main.ts", api: "api/main.ts" },
  outdir: "dist",
  outExtension: { ".js": ".mjs" },
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  packages: "external",
  sourcemap: "linked",
  logLevel: "warning",
});
cpSync(new URL("api/db/migrations/", root), new URL("dist/migrations/", root), { recursive: true });
