import { describe, expect, it } from "vitest";
import { isProjectRepository, parseCredentialRequest } from "./git-credential.ts";

const MANAGED = "http://host.docker.internal:7700/git/3f1c2b9e-8c1e-4c5e-9d1b-2a7e8f0c1d2e.git";
const EXTERNAL = "https://github.com/acme/shop.git";

const ask = (protocol: string, host: string, path?: string) => ({
  protocol,
  host,
  ...(path === undefined ? {} : { path }),
});

describe("the credential helper answers for the project's repository only", () => {
  it("parses git's request up to the blank line", () => {
    expect(
      parseCredentialRequest("protocol=https\nhost=github.com\npath=acme/shop.git\nusername=x\n\nprotocol=http\n"),
    ).toEqual({ protocol: "https", host: "github.com", path: "acme/shop.git", username: "x" });
    expect(parseCredentialRequest("protocol=https\r\nhost=a=b\r\n")).toEqual({ protocol: "https", host: "a=b" });
    expect(parseCredentialRequest("")).toEqual({});
  });

  it("matches the same protocol, host, port and path", () => {
    expect(
      isProjectRepository(
        ask("http", "host.docker.internal:7700", "git/3f1c2b9e-8c1e-4c5e-9d1b-2a7e8f0c1d2e.git"),
        MANAGED,
      ),
    ).toBe(true);
    expect(isProjectRepository(ask("https", "github.com", "acme/shop.git"), EXTERNAL)).toBe(true);
    // Spellings of the same repository: the .git suffix, a trailing slash, the host's case, an explicit default port.
    expect(isProjectRepository(ask("https", "github.com", "acme/shop"), EXTERNAL)).toBe(true);
    expect(isProjectRepository(ask("https", "GitHub.com", "acme/shop.git/"), EXTERNAL)).toBe(true);
    expect(isProjectRepository(ask("https", "github.com:443", "acme/shop.git"), EXTERNAL)).toBe(true);
    expect(
      isProjectRepository(ask("https", "github.com", "acme/my repo.git"), "https://github.com/acme/my%20repo.git"),
    ).toBe(true);
  });

  it("refuses another host, port, scheme or path, and a request without a path", () => {
    const refused: [Record<string, string>, string][] = [
      [ask("https", "evil.example", "acme/shop.git"), EXTERNAL],
      [ask("https", "github.com.evil.example", "acme/shop.git"), EXTERNAL],
      [ask("https", "github.com:8443", "acme/shop.git"), EXTERNAL],
      [ask("http", "github.com", "acme/shop.git"), EXTERNAL],
      [ask("https", "github.com", "acme/other.git"), EXTERNAL],
      [ask("https", "github.com", "acme/shop.git/../other.git"), EXTERNAL],
      [ask("https", "github.com", "acme/shop-fork.git"), EXTERNAL],
      [ask("https", "github.com", "acme"), EXTERNAL],
      [ask("https", "github.com", ""), EXTERNAL],
      [ask("https", "github.com"), EXTERNAL],
      // The API's host, another project's repository, or the API itself.
      [ask("http", "host.docker.internal:7700", "git/00000000-0000-4000-8000-000000000000.git"), MANAGED],
      [ask("http", "host.docker.internal:7700", "v1/projects"), MANAGED],
      [ask("http", "host.docker.internal:7701", "git/3f1c2b9e-8c1e-4c5e-9d1b-2a7e8f0c1d2e.git"), MANAGED],
      [ask("http", "host.docker.internal", "git/3f1c2b9e-8c1e-4c5e-9d1b-2a7e8f0c1d2e.git"), MANAGED],
      [ask("http", "user@host.docker.internal:7700", "git/3f1c2b9e-8c1e-4c5e-9d1b-2a7e8f0c1d2e.git"), MANAGED],
      [{ host: "github.com", path: "acme/shop.git" }, EXTERNAL],
    ];
    for (const [request, repoUrl] of refused) {
      expect(isProjectRepository(request, repoUrl), JSON.stringify(request)).toBe(false);
    }
  });

  it("answers nothing for a repository URL that is not HTTP(S) or not a URL", () => {
    expect(isProjectRepository(ask("file", "", "/srv/repo.git"), "file:///srv/repo.git")).toBe(false);
    expect(isProjectRepository(ask("ssh", "github.com", "acme/shop.git"), "ssh://github.com/acme/shop.git")).toBe(
      false,
    );
    expect(isProjectRepository(ask("https", "github.com", "acme/shop.git"), "/srv/repo.git")).toBe(false);
    expect(isProjectRepository(ask("https", "github.com", ""), "https://github.com/")).toBe(false);
  });
});
