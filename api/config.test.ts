import { describe, expect, it } from "vitest";
import { loadConfig } from "./config.ts";

describe("the API's configuration", () => {
  it("serves previews under SVC_PREVIEW_DOMAIN when set, and refuses a value that is no DNS name", () => {
    expect(loadConfig({ SVC_PREVIEW_DOMAIN: "preview.example.test" }).previewDomain).toBe("preview.example.test");
    expect(loadConfig({}).previewDomain).toBeUndefined();
    expect(() => loadConfig({ SVC_PREVIEW_DOMAIN: "not a domain" })).toThrow(/SVC_PREVIEW_DOMAIN/);
  });
});
