/** A key path in a TOML document: table names, array-of-tables indexes and keys (`["triggers", 1, "schedule"]`). */
export type KeyPath = (string | number)[];

/** `triggers[1].schedule`, `env.SVC_TOKEN`, `project["odd key"]`. */
export function formatKeyPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const part of path) {
    if (typeof part === "number") out += `[${part}]`;
    else {
      const name = String(part);
      const bare = /^[A-Za-z0-9_-]+$/.test(name);
      out += bare ? (out ? `.${name}` : name) : `[${JSON.stringify(name)}]`;
    }
  }
  return out;
}

/** The segments of a dotted TOML key or table name: `a."b.c".d` gives `a`, `b.c`, `d`. */
function splitKey(text: string): string[] {
  const parts: string[] = [];
  const re = /\s*(?:"((?:[^"\\]|\\.)*)"|'([^']*)'|([A-Za-z0-9_-]+))\s*(\.|$)/y;
  while (re.lastIndex < text.length) {
    const match = re.exec(text);
    if (!match) break;
    parts.push(match[1] ?? match[2] ?? match[3] ?? "");
    if (match[4] === "") break;
  }
  return parts;
}

/**
 * Where each table header and key of a TOML document starts (1-based lines). A line scanner, not a parser: it
 * runs only on documents smol-toml has already accepted, to point a schema error at its line.
 */
export function keyLines(text: string): { path: KeyPath; line: number }[] {
  const entries: { path: KeyPath; line: number }[] = [];
  const arrayCounts = new Map<string, number>();
  let table: KeyPath = [];
  let inMultiline: string | null = null;
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.trim();
    if (inMultiline) {
      if (line.split(inMultiline).length % 2 === 0) inMultiline = null;
      return;
    }
    if (!line || line.startsWith("#")) return;
    const arrayHeader = /^\[\[\s*(.+?)\s*\]\]/.exec(line);
    const header = arrayHeader ? null : /^\[\s*(.+?)\s*\]/.exec(line);
    if (arrayHeader) {
      const names = splitKey(arrayHeader[1]!);
      const id = names.join("\u0000");
      const index = arrayCounts.get(id) ?? 0;
      arrayCounts.set(id, index + 1);
      table = [...names, index];
      entries.push({ path: table, line: i + 1 });
      return;
    }
    if (header) {
      table = splitKey(header[1]!);
      entries.push({ path: table, line: i + 1 });
      return;
    }
    const eq = /^((?:"(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_.\s-])+?)\s*=/.exec(line);
    if (!eq) return;
    entries.push({ path: [...table, ...splitKey(eq[1]!)], line: i + 1 });
    const value = line.slice(eq[0].length);
    for (const quote of ['"""', "'''"])
      if (value.includes(quote) && value.split(quote).length % 2 === 0) inMultiline = quote;
  });
  return entries;
}

/** The line of the deepest header or key that `path` starts with; null when none does. */
export function locate(text: string, path: readonly PropertyKey[]): number | null {
  let best: { depth: number; line: number } | null = null;
  for (const entry of keyLines(text)) {
    if (entry.path.length > path.length) continue;
    if (!entry.path.every((part, i) => part === path[i])) continue;
    if (!best || entry.path.length > best.depth) best = { depth: entry.path.length, line: entry.line };
  }
  return best?.line ?? null;
}
