import { parse, TomlError } from "smol-toml";
import { MANIFEST_FILE, Manifest, type ManifestError } from "./manifest.ts";
import { formatKeyPath, locate } from "./manifest-locate.ts";

function error(message: string, line: number | null, key: string | null): { error: ManifestError } {
  const where = [line !== null ? `line ${line}` : null, key].filter(Boolean).join(", ");
  return { error: { message: `${MANIFEST_FILE}${where ? ` (${where})` : ""}: ${message}`, line, key } };
}

/**
 * `svc.toml` text to a manifest, or the first thing wrong with it and where. A pure function of the text, shared by
 * the API (the manifest in force on the default branch) and the CLI (`svc ship` checks it before pushing).
 */
export function parseManifest(text: string): { manifest: Manifest } | { error: ManifestError } {
  let document: unknown;
  try {
    document = parse(text);
  } catch (err) {
    if (!(err instanceof TomlError)) throw err;
    const reason = err.message.split("\n")[0]!.replace(/^Invalid TOML document:\s*/, "");
    return error(`invalid TOML: ${reason}`, err.line ?? null, null);
  }
  const result = Manifest.safeParse(document);
  if (result.success) return { manifest: result.data };
  const issue = result.error.issues[0]!;
  // An unknown key is reported at the key itself, not at the table holding it.
  const path = issue.code === "unrecognized_keys" ? [...issue.path, issue.keys[0]!] : issue.path;
  const key = path.length ? formatKeyPath(path) : null;
  return error(issue.message, locate(text, path), key);
}
