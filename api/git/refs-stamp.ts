import { readdir, stat } from "node:fs/promises";
import { join } from "node:path";

/**
 * What changes on disk when a branch of a repository moves: git writes a lock file and renames it into place, so
 * every loose ref update touches its directory, and packing rewrites `packed-refs` (reftable: `tables.list`).
 * `settled` says every time in it is old enough that a later change cannot carry the same one (file times are
 * coarse: two updates within one tick may leave a directory's time unchanged, as git's own "racy" rule knows).
 */
export type RefsStamp = { key: string; settled: boolean };

// Longer than any filesystem's time granularity (FAT's is two seconds).
const RACY_MS = 2500;

export async function stampRefs(dir: string): Promise<RefsStamp | undefined> {
  const stampedAt = Date.now();
  const parts: string[] = [];
  let newest = 0n;
  async function add(path: string, isDir: boolean): Promise<void> {
    const st = await stat(path, { bigint: true }).catch(() => undefined);
    parts.push(st ? `${st.ino}:${st.mtimeNs}:${st.size}` : "-");
    if (st && st.mtimeNs > newest) newest = st.mtimeNs;
    if (!st?.isDirectory() || !isDir) return;
    for (const entry of await readdir(path, { withFileTypes: true })) {
      if (entry.isDirectory()) await add(join(path, entry.name), true);
    }
  }
  try {
    await add(join(dir, "packed-refs"), false);
    await add(join(dir, "reftable", "tables.list"), false);
    await add(join(dir, "refs", "heads"), true);
  } catch {
    return undefined;
  }
  return { key: parts.join(","), settled: Number(newest / 1_000_000n) < stampedAt - RACY_MS };
}
