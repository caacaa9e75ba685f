import { describe, expect, it } from "vitest";
import { credentialsIn, GitError, git, redact } from "./run.ts";

describe("git error messages", () => {
  it("never carry credentials embedded in a URL", () => {
    const stderr = "fatal: unable to access 'https://bot:ghp_SECRET@git.example.test/org/repo.git/': 403\n";
    expect(redact(stderr)).toBe("fatal: unable to access 'https://***@git.example.test/org/repo.git/': 403\n");
    expect(new GitError(["fetch"], 128, stderr).message).not.toContain("ghp_SECRET");
  });
});

describe("git errors and the secrets of their invocation", () => {
  it("never carry a token passed as an extra header, nor the values given as secrets", async () => {
    const token = "ghp_extraHeaderSecret42";
    const header = `Authorization: Basic ${Buffer.from(`x-access-token:${token}`).toString("base64")}`;
    expect(credentialsIn({ GIT_CONFIG_VALUE_0: header, OTHER: "visible" })).toContain(token);
    const err = new GitError(["fetch", `https://x:${token}@h/r.git`], 128, `fatal: ${token} and s3cret-value\n`, [
      ...credentialsIn({ GIT_CONFIG_VALUE_0: header }),
      "s3cret-value",
    ]);
    expect(`${err.message} ${err.stderr} ${err.args.join(" ")}`).not.toMatch(/extraHeaderSecret|s3cret-value/);
    // A real git failure: the error of the command run with that header carries no credential either.
    const failed = await git(["ls-remote", `/nonexistent/${token}`], {
      env: { GIT_CONFIG_COUNT: "1", GIT_CONFIG_KEY_0: "http.https://x/.extraHeader", GIT_CONFIG_VALUE_0: header },
    }).catch((e: unknown) => e as GitError);
    expect(failed).toBeInstanceOf(GitError);
    expect(JSON.stringify({ ...(failed as GitError), message: (failed as GitError).message })).not.toContain(token);
  });
});
