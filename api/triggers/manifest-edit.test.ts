import { parse } from "smol-toml";
import { describe, expect, it } from "vitest";
import { setTriggerEnabled } from "./manifest-edit.ts";

const MANIFEST = `# project manifest
[project]
name = "demo"

[[triggers]]
slug = "nightly"   # the big one
schedule = "0 3 * * *"
prompt = """
run the [nightly] checks
"""
enabled = true # keep

[[triggers]]
  slug = 'hourly'
  schedule = "0 * * * *"
  prompt = "hourly"

[[apps]]
slug = "hourly"
`;

describe("setTriggerEnabled", () => {
  it("rewrites the enabled line of the matching table only, keeping its comment", () => {
    const out = setTriggerEnabled(MANIFEST, "nightly", false)!;
    expect(out).toBe(MANIFEST.replace("enabled = true # keep", "enabled = false # keep"));
    expect((parse(out).triggers as { enabled?: boolean }[])[0]!.enabled).toBe(false);
  });

  it("inserts the line after the slug, indented alike, when the table has none", () => {
    const out = setTriggerEnabled(MANIFEST, "hourly", false)!;
    expect(out).toContain("  slug = 'hourly'\n  enabled = false\n  schedule");
    const parsed = parse(out) as { triggers: { enabled?: boolean }[]; apps: object[] };
    expect(parsed.triggers[1]!.enabled).toBe(false);
    expect(parsed.apps[0]).toEqual({ slug: "hourly" });
  });

  it("keeps CRLF line ends and finds nothing for an unknown slug or a non-trigger table", () => {
    const crlf = MANIFEST.replace(/\n/g, "\r\n");
    expect(setTriggerEnabled(crlf, "nightly", false)).toBe(crlf.replace("enabled = true", "enabled = false"));
    expect(setTriggerEnabled(MANIFEST, "nope", true)).toBeUndefined();
    expect(setTriggerEnabled("[[apps]]\nslug = 'x'\n", "x", true)).toBeUndefined();
  });
});
