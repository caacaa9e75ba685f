import { describe, expect, it } from "vitest";
import { loadConfig } from "./config.ts";

describe("the API's configuration", () => {
  it("serves previews under SVC_PREVIEW_DOMAIN when set, and refuses a value that is no DNS name", () => {
    expect(loadConfig({ SVC_PREVIEW_DOMAIN: "preview.example.test" }).previewDomain).toBe("preview.example.test");
    expect(loadConfig({}).previewDomain).toBeUndefined();
    expect(() => loadConfig({ SVC_PREVIEW_DOMAIN: "not a domain" })).toThrow(/SVC_PREVIEW_DOMAIN/);
  });

  it("takes single sign-on's settings together, and says which are missing without printing the secret", () => {
    const secret = "oidc-client-secret-value";
    const full = {
      SVC_OIDC_ISSUER: "https://id.example.test/realms/team",
      SVC_OIDC_CLIENT_ID: "svc",
      SVC_OIDC_CLIENT_SECRET: secret,
      SVC_OIDC_ALLOWED_DOMAINS: "Example.test, team.example.test",
    };
    expect(loadConfig(full).oidc).toEqual({
      issuer: "https://id.example.test/realms/team",
      clientId: "svc",
      clientSecret: secret,
      allowedDomains: ["example.test", "team.example.test"],
    });
    expect(loadConfig({}).oidc).toBeUndefined();
    // Without allowed domains, only people who already have a user sign in with SSO.
    expect(loadConfig({ ...full, SVC_OIDC_ALLOWED_DOMAINS: undefined }).oidc?.allowedDomains).toEqual([]);

    const { SVC_OIDC_CLIENT_ID: _id, ...noClientId } = full;
    expect(() => loadConfig(noClientId)).toThrow(/needs SVC_OIDC_CLIENT_ID \(/);
    const { SVC_OIDC_ISSUER: _issuer, SVC_OIDC_CLIENT_SECRET: _secret, ...onlyId } = full;
    expect(() => loadConfig(onlyId)).toThrow(/needs SVC_OIDC_ISSUER, SVC_OIDC_CLIENT_SECRET \(/);
    expect(() => loadConfig({ SVC_OIDC_ALLOWED_DOMAINS: "example.test" })).toThrow(/SVC_OIDC_ISSUER/);
    for (const partial of [noClientId, onlyId, { ...full, SVC_OIDC_ISSUER: "ftp://id" }])
      expect(() => loadConfig(partial)).not.toThrow(new RegExp(secret));

    // http only on this machine's loopback: elsewhere a network would carry the codes and tokens.
    expect(loadConfig({ ...full, SVC_OIDC_ISSUER: "http://localhost:9000" }).oidc?.issuer).toBe(
      "http://localhost:9000",
    );
    expect(loadConfig({ ...full, SVC_OIDC_ISSUER: "http://127.0.0.1:9000" }).oidc).toBeDefined();
    expect(() => loadConfig({ ...full, SVC_OIDC_ISSUER: "http://id.example.test" })).toThrow(/SVC_OIDC_ISSUER/);
    expect(() => loadConfig({ ...full, SVC_OIDC_ALLOWED_DOMAINS: "example.test, not a domain" })).toThrow(
      /SVC_OIDC_ALLOWED_DOMAINS/,
    );
  });
});
