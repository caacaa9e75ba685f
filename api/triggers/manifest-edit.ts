/**
 * Sets `enabled` of one `[[triggers]]` table by editing the text of `svc.toml`, so that every comment, blank line
 * and the order of keys stay as the project wrote them: the `enabled = …` line of the table whose `slug` matches
 * is rewritten (its trailing comment kept), or one is inserted after the slug line. Undefined when no
 * `[[triggers]]` table has that slug.
 */
export function setTriggerEnabled(text: string, slug: string, enabled: boolean): string | undefined {
  const eol = text.includes("\r\n") ? "\r\n" : "\n";
  const lines = text.split(/\r?\n/);
  const tables = tablesOf(lines).filter((t) => t.header === "triggers" && t.array);
  for (const table of tables) {
    const slugLine = table.lines.find((i) => slugOf(lines[i]!) === slug);
    if (slugLine === undefined) continue;
    const enabledLine = table.lines.find((i) => /^\s*enabled\s*=/.test(lines[i]!));
    if (enabledLine !== undefined) {
      lines[enabledLine] = lines[enabledLine]!.replace(
        /^(\s*enabled\s*=\s*)[^\s#]+/,
        (_m, head: string) => `${head}${enabled}`,
      );
    } else {
      const indent = /^\s*/.exec(lines[slugLine]!)![0];
      lines.splice(slugLine + 1, 0, `${indent}enabled = ${enabled}`);
    }
    return lines.join(eol);
  }
  return undefined;
}

type Table = { header: string; array: boolean; lines: number[] };

/** Tables by header with the indexes of their key lines (lines inside multi-line strings belong to no key). */
function tablesOf(lines: string[]): Table[] {
  const tables: Table[] = [];
  let current: Table | undefined;
  let inString: string | undefined;
  lines.forEach((line, i) => {
    if (inString) {
      if (countOf(line, inString) % 2 === 1) inString = undefined;
      return;
    }
    const header = /^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$/.exec(line);
    if (header) {
      current = { header: header[2]!.replace(/\s+/g, ""), array: header[1] === "[[", lines: [] };
      tables.push(current);
      return;
    }
    if (current && /^\s*[\w"'-]/.test(line)) current.lines.push(i);
    for (const quote of ['"""', "'''"]) if (countOf(line, quote) % 2 === 1) inString = quote;
  });
  return tables;
}

const countOf = (line: string, needle: string) => line.split(needle).length - 1;

function slugOf(line: string): string | undefined {
  const m = /^\s*(?:slug|"slug"|'slug')\s*=\s*(?:"((?:[^"\\]|\\.)*)"|'([^']*)')/.exec(line);
  if (!m) return undefined;
  return m[2] ?? JSON.parse(`"${m[1]}"`);
}
