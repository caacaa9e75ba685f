import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The installed package's root, found the same way from the source tree and from the dist/ bundle. */
export function packageRoot(from = fileURLToPath(import.meta.url)): string {
  let dir = dirname(from);
  while (!existsSync(join(dir, "package.json"))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`no package.json above ${from}`);
    dir = parent;
  }
  return dir;
}

/**
 * The bundle's migrated, empty embedded database, copied into a new data directory in place of initdb (written by
 * scripts/build.mjs, read by api/db/pglite-template.ts); no image takes it.
 */
export const PGLITE_TEMPLATE_FILE = "pglite-template.tar.gz";
