import { describe, expect, it } from "vitest";
import { GitError, redact } from "./run.ts";

describe("git error messages", () => {
  it("never carry credentials embedded in a URL", () => {
    const stderr = "fatal: unable to access 'https://bot:ghp_SECRET@git.example.test/org/repo.git/': 403\n";
    expect(redact(stderr)).toBe("fatal: unable to access 'https://***@git.example.test/org/repo.git/': 403\n");
    expect(new GitError(["fetch"], 128, stderr).message).not.toContain("ghp_SECRET");
  });
});
