import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { packageRoot } from "../../protocol/package-root.ts";
import { apiError } from "../errors.ts";

/** The CLI as one self-contained ESM file (scripts/build.mjs), as /v1/cli/svc.mjs serves it. */
export type CliBundle = { bytes: Buffer; sha256: string; version: string | undefined };

/** dist/sandbox/svc.mjs of this package: found the same way from the API's own bundle in dist/ and from source. */
export function defaultCliBundlePath(): string {
  return join(packageRoot(fileURLToPath(import.meta.url)), "dist", "sandbox", "svc.mjs");
}

/** scripts/build.mjs opens the bundle with `// svc <version>`: its version without running it. */
const VERSION_LINE = /^\/\/ svc (\S+)\n/;

/**
 * Reads the bundle on first use and keeps it: the file the API started with is the one it serves. A failed read is
 * not kept, so a bundle built after the API started is found on the next request.
 */
export function createCliBundleSource(deps: { path: string; log: (msg: string, extra: object) => void }) {
  let loading: Promise<CliBundle> | undefined;

  async function load(): Promise<CliBundle> {
    let bytes: Buffer;
    try {
      bytes = await readFile(deps.path);
    } catch (err) {
      deps.log("the CLI bundle cannot be read", { path: deps.path, error: (err as Error).message });
      // The server's paths are not the business of an unauthenticated caller; the log has them.
      throw apiError(
        "NOT_CONFIGURED",
        "this server has no CLI bundle to serve: run 'npm run build' where the API runs",
      );
    }
    return {
      bytes,
      sha256: createHash("sha256").update(bytes).digest("hex"),
      version: VERSION_LINE.exec(bytes.subarray(0, 200).toString("utf8"))?.[1],
    };
  }

  return {
    get(): Promise<CliBundle> {
      loading ??= load().catch((err) => {
        loading = undefined;
        throw err;
      });
      return loading;
    },
  };
}

export type CliBundleSource = ReturnType<typeof createCliBundleSource>;
