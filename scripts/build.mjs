// Bundles the programs into dist/ (fast start-up; the servers' dependencies stay in node_modules, but for dockerode) and copies
// the SQL migrations.
import { cpSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { build } from "esbuild";

const root = new URL("../", import.meta.url);
const pkg = JSON.parse(readFileSync(new URL("package.json", root), "utf8"));
// Built beside dist/ and swapped in at the end: a CLI or API started from dist/ meanwhile (a test run, the stack)
// never finds it half written.
const out = `dist.building-${process.pid}`;
rmSync(new URL(`${out}/`, root), { recursive: true, force: true });
/**
 * zod's messages in English only: its `locales` namespace (half of the bundled zod, 368 KB of other languages, none
 * of which svc uses) reduced to `en`, which zod registers itself. A CLI command compiles that much less at start-up
 * (hosts ls: 292 -> 273 CPU-ms, 30 runs each in turn).
 */
const zodEnglishOnly = {
  name: "zod-english-only",
  setup(b) {
    b.onResolve({ filter: /^\.\.\/locales\/index\.js$/ }, (args) =>
      args.importer.includes("/node_modules/zod/")
        ? { path: args.resolveDir.replace(/\/(classic|core)$/, "/locales/en.js"), namespace: "zod-english-only" }
        : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: "zod-english-only" }, (args) => ({
      contents: `export { default as en } from ${JSON.stringify(args.path)};`,
      resolveDir: root.pathname,
    }));
  },
};
/** A `require` for an ES module bundle whose bundled CommonJS dependencies call it. */
const ESM_REQUIRE =
  "import { createRequire as __svcCreateRequire } from 'node:module'; const require = __svcCreateRequire(import.meta.url);";
/**
 * dockerode in the server bundles, but its two transports svc never uses (an ssh:// engine; BuildKit sessions, whose
 * gRPC stack is half of what dockerode loads) loaded from node_modules at their first call instead of at start-up:
 * an API process starts on 0.14 CPU-s less (require("dockerode") alone costs that much).
 */
const DOCKER_CLIENT = /^(dockerode|docker-modem)$/;
const ON_FIRST_CALL = {
  "dockerode/lib/docker.js": { "./session": "dockerode/lib/session.js" },
  "docker-modem/lib/modem.js": { "./ssh": "docker-modem/lib/ssh.js" },
};
const dockerTransportsOnDemand = {
  name: "docker-transports-on-demand",
  setup(b) {
    b.onResolve({ filter: DOCKER_CLIENT }, (args) => ({
      path: createRequire(`${args.resolveDir}/`).resolve(args.path),
    }));
    b.onResolve({ filter: /^\.\/(session|ssh)$/ }, (args) => {
      const file = Object.keys(ON_FIRST_CALL).find((f) => args.importer.endsWith(`/node_modules/${f}`));
      const real = file && ON_FIRST_CALL[file][args.path];
      return real ? { path: real, namespace: "on-first-call" } : undefined;
    });
    b.onLoad({ filter: /.*/, namespace: "on-first-call" }, (args) => ({
      contents: `module.exports = function () { return require(${JSON.stringify(args.path)}).apply(this, arguments); };`,
      loader: "js",
      resolveDir: root.pathname,
    }));
  },
};
// The server programs: node_modules beside them (`packages: "external"`), but for dockerode (above).
const server = {
  absWorkingDir: root.pathname,
  outdir: out,
  outExtension: { ".js": ".mjs" },
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  packages: "external",
  logLevel: "warning",
  plugins: [dockerTransportsOnDemand],
  banner: { js: ESM_REQUIRE },
};
await build({ ...server, entryPoints: { api: "api/main.ts", edge: "api/edge/main.ts" }, sourcemap: "linked" });
// The CLI in chunks: `svc <noun>` loads the code of that noun only (cli/program.ts), with its dependencies bundled
// in, since resolving and loading their many files from node_modules costs more at start-up than the command.
await build({
  absWorkingDir: root.pathname,
  entryPoints: { "cli/run": "cli/run.ts", "cli/git-credential-helper": "cli/git-credential-helper.ts" },
  outdir: out,
  outExtension: { ".js": ".mjs" },
  chunkNames: "cli/[name]-[hash]",
  splitting: true,
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  sourcemap: "linked",
  logLevel: "warning",
  plugins: [zodEnglishOnly],
  banner: {
    js: ESM_REQUIRE,
  },
});
// Its entry point, one CommonJS file that loads the chunks only for a command other than `svc version` (and git's
// credential requests only theirs): Node starts a CommonJS file as fast as `node -e 0` and an ES module 1.17x slower,
// and each further file costs a little more.
await build({
  absWorkingDir: root.pathname,
  entryPoints: { svc: "cli/main.ts" },
  outdir: out,
  outExtension: { ".js": ".cjs" },
  bundle: true,
  platform: "node",
  format: "cjs",
  target: "node20",
  logLevel: "warning",
  plugins: [
    {
      name: "cli-run-chunks",
      setup: (b) =>
        b.onResolve({ filter: /^\.\/(run|git-credential-helper)\.ts$/ }, (args) => ({
          path: `./cli/${args.path.slice(2, -3)}.mjs`,
          external: true,
        })),
    },
  ],
});
cpSync(new URL("api/db/migrations/", root), new URL(`${out}/migrations/`, root), { recursive: true });
// A new embedded database starts as a copy of a migrated, empty one (api/db/pglite-template.ts): made here, by the
// same PGlite and migrations the bundle runs, with the code that makes it bundled beside the migrations for a moment.
await build({ ...server, entryPoints: { "pglite-template-maker": "api/db/pglite-template.ts" } });
const maker = new URL(`${out}/pglite-template-maker.mjs`, root);
const { makePgliteTemplate, PGLITE_TEMPLATE_FILE } = await import(maker.href);
writeFileSync(new URL(`${out}/${PGLITE_TEMPLATE_FILE}`, root), await makePgliteTemplate("gzip"));
rmSync(maker);
// The dashboard's browser scripts, served as they are: beside the bundle as beside their module.
cpSync(new URL("api/dashboard/assets/", root), new URL(`${out}/assets/`, root), { recursive: true });
// The install script template the API serves (api/install/routes.ts), beside the bundle as beside its module.
cpSync(new URL("api/install/served-install.sh", root), new URL(`${out}/served-install.sh`, root));

// Self-contained bundles for the sandbox image, which has node but no node_modules.
await build({
  absWorkingDir: root.pathname,
  entryPoints: {
    "svc-agent": "daemon/main.ts",
    "svc-git-credential": "daemon/git-credential-main.ts",
    "svc-log": "daemon/log-keeper.ts",
    svc: "cli/main.ts",
  },
  outdir: `${out}/sandbox`,
  outExtension: { ".js": ".mjs" },
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  logLevel: "warning",
  plugins: [zodEnglishOnly],
  // The first line names the version (the API announces it without running the file); bundled CommonJS
  // dependencies call require(), so the ESM bundle gets one.
  banner: {
    js: `// svc ${pkg.version}\n${ESM_REQUIRE}`,
  },
});
const old = `dist.old-${process.pid}`;
try {
  renameSync(new URL("dist/", root), new URL(`${old}/`, root));
} catch (err) {
  if (err.code !== "ENOENT") throw err;
}
renameSync(new URL(`${out}/`, root), new URL("dist/", root));
rmSync(new URL(`${old}/`, root), { recursive: true, force: true });
