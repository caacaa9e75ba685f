import { describe, expect, it } from "vitest";
import { commentPrompt, excerpt, resolveNote, resolvePrompt } from "./feedback-prompt.ts";

const CR = { number: 7, title: "Greet people", head_ref: "feature/greet", base_ref: "main" };
const FILE = `${Array.from({ length: 12 }, (_, i) => `line ${i + 1}`).join("\n")}\n`;

describe("prompts for a CR's agent", () => {
  it("shows the commented line with three lines either side, numbered and marked, cut at the file's ends", () => {
    expect(excerpt(FILE, 6).split("\n")).toEqual([
      "  3 | line 3",
      "  4 | line 4",
      "  5 | line 5",
      "> 6 | line 6",
      "  7 | line 7",
      "  8 | line 8",
      "  9 | line 9",
    ]);
    expect(excerpt(FILE, 1).split("\n")).toEqual(["> 1 | line 1", "  2 | line 2", "  3 | line 3", "  4 | line 4"]);
    expect(excerpt(FILE, 12).split("\n")).toEqual([
      "   9 | line 9",
      "  10 | line 10",
      "  11 | line 11",
      "> 12 | line 12",
    ]);
    expect(excerpt(`${"x".repeat(400)}\n`, 1)).toBe(`> 1 | ${"x".repeat(300)}…`);
  });

  it("a line comment names the CR, the file, line and commit, quotes the code and the comment, and says where to push", () => {
    const prompt = commentPrompt(CR, {
      author: "ann@example.test",
      body: "Say hello politely.",
      path: "src/greet.ts",
      line: 6,
      headSha: "0123456789abcdef0123456789abcdef01234567",
      excerpt: excerpt(FILE, 6),
    });
    expect(prompt).toContain('CR #7 "Greet people" from ann@example.test');
    expect(prompt).toContain("File: src/greet.ts, line 6 (at commit 0123456789ab):\n");
    expect(prompt).toContain("  5 | line 5\n> 6 | line 6\n  7 | line 7");
    expect(prompt).toContain("Comment:\nSay hello politely.");
    expect(prompt).toContain("push to that same branch (git push origin HEAD), so CR #7 updates");
    expect(prompt).toContain("feature/greet");
  });

  it("a general comment has no file part", () => {
    const prompt = commentPrompt(CR, {
      author: "ann@example.test",
      body: "Looks good, add a test.",
      path: null,
      line: null,
      headSha: "0123456789abcdef0123456789abcdef01234567",
      excerpt: null,
    });
    expect(prompt).not.toContain("File:");
    expect(prompt).toContain("Comment:\nLooks good, add a test.");
  });

  it("asks for a merge of the base, the conflicting files named, pushed to the same branch", () => {
    const prompt = resolvePrompt(CR, ["a.txt", "b/c.txt"]);
    expect(prompt).toContain("conflicts with main in:\n- a.txt\n- b/c.txt");
    expect(prompt).toContain("git fetch origin main && git merge origin/main");
    expect(prompt).toContain("so CR #7 updates");
    expect(resolveNote(CR, ["a.txt", "b/c.txt"])).toBe(
      "Asked the agent to merge main into feature/greet and resolve the conflicts in a.txt, b/c.txt.",
    );
  });
});
