/** Rows for people on a terminal (aligned columns) and for programs otherwise (tab-separated). */
export function printTable(rows: string[][], options: { header?: string[] } = {}): void {
  if (!process.stdout.isTTY) {
    for (const row of rows) process.stdout.write(`${row.join("\t")}\n`);
    return;
  }
  const all = options.header ? [options.header, ...rows] : rows;
  const widths = all[0]?.map((_, i) => Math.max(...all.map((r) => (r[i] ?? "").length))) ?? [];
  for (const row of all)
    process.stdout.write(`${row.map((c, i) => (i === row.length - 1 ? c : c.padEnd(widths[i]!))).join("  ")}\n`);
}

/** Colour only for a terminal, and never with NO_COLOR or --no-color. */
export function useColor(flag: boolean | undefined): boolean {
  return Boolean(process.stdout.isTTY) && !process.env.NO_COLOR && flag !== false;
}
