/**
 * A table as text: for people on a terminal, an uppercase header row and aligned columns (gh's convention); for
 * programs (a pipe, a file), tab-separated rows and no header, so `cut -f2` and friends keep working.
 */
export function renderTable(rows: string[][], options: { header: string[]; tty: boolean }): string {
  if (!options.tty) return rows.map((row) => `${row.join("\t")}\n`).join("");
  // An empty list says so in words (the command's own line on stderr), not with a header over nothing.
  if (rows.length === 0) return "";
  const all = [options.header.map((h) => h.toUpperCase()), ...rows];
  const widths = all[0]!.map((_, i) => Math.max(...all.map((r) => (r[i] ?? "").length)));
  // No trailing blanks on a line: the last column is not padded, nor are cells left empty at a row's end.
  return all
    .map(
      (row) =>
        `${row
          .map((c, i) => c.padEnd(widths[i]!))
          .join("  ")
          .trimEnd()}\n`,
    )
    .join("");
}

/** Rows on stdout: under their column names on a terminal, tab-separated without them otherwise. */
export function printTable(rows: string[][], options: { header: string[] }): void {
  process.stdout.write(renderTable(rows, { ...options, tty: Boolean(process.stdout.isTTY) }));
}

/** Colour only for a terminal, and never with NO_COLOR or --no-color. */
export function useColor(flag: boolean | undefined): boolean {
  return Boolean(process.stdout.isTTY) && !process.env.NO_COLOR && flag !== false;
}
