import { createHash } from "node:crypto";
import { copyFileSync, linkSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ImageVerbs } from "../sandbox/driver.ts";

export type PlatformImageOptions = {
  /** The package root: images/sandbox and dist/sandbox live under it. */
  root: string;
  baseImage: string;
  nodeBinary?: string;
  opencodeBinary?: string;
};

/**
 * The build context: every file of images/sandbox (the Dockerfile and its scripts) and of dist/sandbox (the bundles),
 * whatever the Dockerfile copies of them, and the two binaries. Listed from the directories, not by name, so an API
 * started before a build that added a file still sends it.
 */
function sources(options: PlatformImageOptions): Record<string, string> {
  const filesIn = (dir: string) => Object.fromEntries(readdirSync(dir).map((name) => [name, join(dir, name)]));
  return {
    ...filesIn(join(options.root, "images", "sandbox")),
    ...filesIn(join(options.root, "dist", "sandbox")),
    node: options.nodeBinary ?? process.execPath,
    opencode: options.opencodeBinary ?? join(options.root, "node_modules", "opencode-linux-x64", "bin", "opencode"),
  };
}

const BIG_FILES = new Set(["node", "opencode"]);

/** Content hash of everything that goes into the image; the two large binaries count by identity and size. */
function imageKey(files: Record<string, string>, baseImage: string): string {
  const hash = createHash("sha256").update(baseImage);
  for (const [name, path] of Object.entries(files).sort(([a], [b]) => a.localeCompare(b))) {
    hash.update(`\0${name}\0`);
    if (BIG_FILES.has(name)) {
      const st = statSync(path);
      hash.update(`${st.size}:${st.mtimeMs}`);
    } else hash.update(readFileSync(path));
  }
  return hash.digest("hex").slice(0, 16);
}

/** The platform sandbox image, built once per change of its inputs: `svc-sandbox:<key>`. */
async function ensurePlatformImage(driver: ImageVerbs, options: PlatformImageOptions): Promise<string> {
  const files = sources(options);
  const tag = `svc-sandbox:${imageKey(files, options.baseImage)}`;
  if (await driver.imageExists(tag)) return tag;
  const dir = mkdtempSync(join(tmpdir(), "svc-image-"));
  try {
    for (const [name, path] of Object.entries(files)) {
      try {
        linkSync(path, join(dir, name));
      } catch {
        copyFileSync(path, join(dir, name));
      }
    }
    await driver.buildImage({
      tag,
      context: { dir, files: Object.keys(files) },
      buildArgs: { BASE_IMAGE: options.baseImage },
    });
    return tag;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The platform image, resolved once per process; a failed build is tried again on the next call. */
export function platformImageResolver(driver: ImageVerbs, options: PlatformImageOptions): () => Promise<string> {
  let image: Promise<string> | undefined;
  return () => {
    if (!image) {
      image = ensurePlatformImage(driver, options);
      image.catch(() => {
        image = undefined;
      });
    }
    return image;
  };
}
