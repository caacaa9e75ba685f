import { describe, expect, it } from "vitest";
import { parseRawNumstat } from "./diff.ts";

/** What `git diff -M --raw --numstat -z` printed (git 2.39) for a commit touching one file of each kind. */
const REAL_OUTPUT = [
  ":100644 100644 bdc955b 8835708 M\0bin.dat\0",
  ":100644 100755 5626abf 814f4a4 M\0edit.txt\0",
  ":100644 000000 286c5f5 0000000 D\0gone.txt\0",
  ":000000 100644 0000000 3e75765 A\0new file.txt\0",
  ":100644 100644 71ac1b5 b236ae5 R088\0moved.txt\0renamed.txt\0",
  "-\t-\tbin.dat\0",
  "1\t0\tedit.txt\0",
  "0\t1\tgone.txt\0",
  "1\t0\tnew file.txt\0",
  "1\t0\t\0moved.txt\0renamed.txt\0",
].join("");

const file = (path: string, fields: Partial<Record<string, unknown>>) => ({
  path,
  old_path: null,
  status: "modified",
  additions: 0,
  deletions: 0,
  binary: false,
  ...fields,
});

describe("parseRawNumstat", () => {
  it("reads every kind of change git reports, in git's order", () => {
    expect(parseRawNumstat(REAL_OUTPUT)).toEqual([
      file("bin.dat", { binary: true }),
      file("edit.txt", { additions: 1 }),
      file("gone.txt", { status: "deleted", deletions: 1 }),
      file("new file.txt", { status: "added", additions: 1 }),
      file("renamed.txt", { old_path: "moved.txt", additions: 1 }),
    ]);
  });

  it("returns no files for an empty diff", () => {
    expect(parseRawNumstat("")).toEqual([]);
  });

  it("reports a copy as added with its source, and a type change as modified", () => {
    const output =
      ":100644 100644 1111111 1111111 C100\0src/a.ts\0src/b.ts\0:120000 100644 2222222 3333333 T\0link\0" +
      "0\t0\t\0src/a.ts\0src/b.ts\0" +
      "1\t1\tlink\0";
    expect(parseRawNumstat(output)).toEqual([
      file("src/b.ts", { status: "added", old_path: "src/a.ts" }),
      file("link", { additions: 1, deletions: 1 }),
    ]);
  });

  it("keeps paths with spaces, unicode and newlines as git wrote them under -z", () => {
    const odd = "dir with space/naïve\nname.md";
    const output = `:000000 100644 0000000 4444444 A\0${odd}\0` + `120\t0\t${odd}\0`;
    expect(parseRawNumstat(output)).toEqual([file(odd, { status: "added", additions: 120 })]);
  });

  it("ignores a numstat record for a path the raw records did not list", () => {
    const output = ":100644 100644 5555555 6666666 M\0a.txt\0" + "3\t2\ta.txt\0" + "9\t9\tstray.txt\0";
    expect(parseRawNumstat(output)).toEqual([file("a.txt", { additions: 3, deletions: 2 })]);
  });

  it("counts the lines of a path that contains a tab", () => {
    const output = ":000000 100644 0000000 b77b4eb A\0tab\there.txt\0" + "2\t0\ttab\there.txt\0";
    expect(parseRawNumstat(output)).toEqual([file("tab\there.txt", { status: "added", additions: 2 })]);
  });
});
