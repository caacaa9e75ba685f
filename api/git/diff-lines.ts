import type { Diff } from "../../protocol/change-request.ts";

/** The unified patch cut at each file's `diff --git` line, in the order git lists the files. */
export function patchPerFile(patch: string): string[][] {
  const files: string[][] = [];
  for (const line of patch.split("\n")) {
    if (line.startsWith("diff --git ")) files.push([]);
    files.at(-1)?.push(line);
  }
  return files;
}

export type PatchLine = {
  text: string;
  kind: "hunk" | "add" | "del" | "context" | "note";
  /** Its number in the file at the head (the new side); null for a removed line, a hunk header or a note. */
  newLine: number | null;
};

const HUNK = /^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@/;

/**
 * One file's patch (a `patchPerFile` entry) from its first hunk on, each line with its new-side number. Lines are
 * told apart by their place in a hunk, not their look: a removed line reading `-- x` shows as `--- x`.
 */
export function numberedLines(filePatch: string[]): PatchLine[] {
  const first = filePatch.findIndex((l) => HUNK.test(l));
  if (first < 0) return [];
  const lines: PatchLine[] = [];
  let next = 0;
  for (const text of filePatch.slice(first)) {
    const hunk = HUNK.exec(text);
    if (hunk) {
      next = Number(hunk[1]);
      lines.push({ text, kind: "hunk", newLine: null });
    } else if (text.startsWith("+")) lines.push({ text, kind: "add", newLine: next++ });
    else if (text.startsWith(" ")) lines.push({ text, kind: "context", newLine: next++ });
    else if (text.startsWith("-")) lines.push({ text, kind: "del", newLine: null });
    // `\ No newline at end of file`, and the empty string after the patch's last newline.
    else if (text !== "") lines.push({ text, kind: "note", newLine: null });
  }
  return lines;
}

/** For each file of a CR's diff (by its path at the head), the new-side lines its hunks show. */
export function shownLines(diff: Diff): Map<string, Set<number>> {
  const chunks = patchPerFile(diff.patch);
  return new Map(
    diff.files.map((file, i) => [
      file.path,
      new Set(
        numberedLines(chunks[i] ?? [])
          .map((l) => l.newLine)
          .filter((n) => n !== null),
      ),
    ]),
  );
}
