import { describe, expect, it } from "vitest";
import type { Diff } from "../../protocol/change-request.ts";
import { numberedLines, patchPerFile, shownLines } from "./diff-lines.ts";

/** What `git diff` printed (git 2.39) for a two-hunk edit, a removed line reading `-- x`, a binary and a deletion. */
const PATCH = [
  "diff --git a/app.txt b/app.txt",
  "index 1111111..2222222 100644",
  "--- a/app.txt",
  "+++ b/app.txt",
  "@@ -1,3 +1,4 @@",
  " one",
  "-two",
  "+TWO",
  "+two and a half",
  " three",
  "@@ -20,2 +21,2 @@ section",
  " twenty",
  "--- x",
  "+twenty-one",
  "\\ No newline at end of file",
  "diff --git a/logo.png b/logo.png",
  "index 3333333..4444444 100644",
  "Binary files a/logo.png and b/logo.png differ",
  "diff --git a/gone.txt b/gone.txt",
  "deleted file mode 100644",
  "index 5555555..0000000",
  "--- a/gone.txt",
  "+++ /dev/null",
  "@@ -1,2 +0,0 @@",
  "-a",
  "-b",
  "",
].join("\n");

const file = (path: string, status: "modified" | "deleted") => ({
  path,
  old_path: null,
  status,
  additions: 0,
  deletions: 0,
  binary: false,
});

describe("the lines a CR's diff shows", () => {
  it("numbers each line of a hunk on the new side; removed lines, headers and notes have none", () => {
    const [app] = patchPerFile(PATCH);
    expect(numberedLines(app!).map((l) => [l.kind, l.newLine, l.text])).toEqual([
      ["hunk", null, "@@ -1,3 +1,4 @@"],
      ["context", 1, " one"],
      ["del", null, "-two"],
      ["add", 2, "+TWO"],
      ["add", 3, "+two and a half"],
      ["context", 4, " three"],
      ["hunk", null, "@@ -20,2 +21,2 @@ section"],
      ["context", 21, " twenty"],
      ["del", null, "--- x"],
      ["add", 22, "+twenty-one"],
      ["note", null, "\\ No newline at end of file"],
    ]);
  });

  it("gives every file its shown lines by path: none for a binary or a deleted file", () => {
    const diff: Diff = {
      base_sha: "a".repeat(40),
      head_sha: "b".repeat(40),
      patch: PATCH,
      files: [
        file("app.txt", "modified"),
        { ...file("logo.png", "modified"), binary: true },
        file("gone.txt", "deleted"),
      ],
    };
    const shown = shownLines(diff);
    expect([...shown.keys()]).toEqual(["app.txt", "logo.png", "gone.txt"]);
    expect([...shown.get("app.txt")!]).toEqual([1, 2, 3, 4, 21, 22]);
    expect(shown.get("logo.png")!.size).toBe(0);
    expect(shown.get("gone.txt")!.size).toBe(0);
  });
});
