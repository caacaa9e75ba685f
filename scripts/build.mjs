// Bundles the programs into dist/ (fast start-up; dependencies stay in node_modules) and copies the SQL migrations.
import { cpSync, rmSync } from "node:fs";
import { build } from "esbuild";

const root = new URL("../", import.meta.url);
rmSync(new URL("dist/", root), { recursive: true, force: true });
await build({
  absWorkingDir: root.pathname,
  entryPoints: { svc: "cli/main.ts", api: "api/main.ts", edge: "api/edge/main.ts" },
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
// The dashboard's browser scripts, served as they are: beside the bundle as beside their module.
cpSync(new URL("api/dashboard/assets/", root), new URL("dist/assets/", root), { recursive: true });

// Self-contained bundles for the sandbox image, which has node but no node_modules.
await build({
  absWorkingDir: root.pathname,
  entryPoints: { "svc-agent": "daemon/main.ts", svc: "cli/main.ts" },
  outdir: "dist/sandbox",
  outExtension: { ".js": ".mjs" },
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  logLevel: "warning",
  // Bundled CommonJS dependencies call require(); give the ESM bundle one.
  banner: {
    js: "import { createRequire as __svcCreateRequire } from 'node:module'; const require = __svcCreateRequire(import.meta.url);",
  },
});
