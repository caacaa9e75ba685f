import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SandboxedProject, startSandboxedProject } from "../support/sandboxed-project.ts";

/**
 * A secret stored before the API refused control characters (a NUL) makes the container engine fail, and its error
 * quotes the whole variable: what the session and sandbox rows keep, and what the API shows, must not carry it.
 */
describe("provisioning errors", () => {
  let sandboxed: SandboxedProject;
  beforeAll(async () => {
    sandboxed = await startSandboxedProject("Leaky");
  });
  afterAll(async () => {
    await sandboxed?.close();
  });

  it("redacts secret values and tokens from a failed session's stored and shown error", async () => {
    const { api, db, project, sessions } = sandboxed;
    const leaked = "sec\u0000ret-value-0123456789";
    await api.services.secrets.set(project.id, { LEAKY: leaked });
    const created = (await sessions("", "POST", {})).body;
    let session = created;
    for (let i = 0; i < 600 && session.status === "provisioning"; i++) {
      await new Promise((r) => setTimeout(r, 100));
      session = (await sessions(`/${created.session_id}`)).body;
    }
    expect(session.status).toBe("failed");
    // The engine's own words are kept, so the user can tell what went wrong...
    expect(session.error).toMatch(/environment variable/);
    expect(session.error).toContain("***");
    const [sandbox] = await db.sql.query<{ error: string; token: string }>(
      "select error from session_sandboxes where session_id = $1",
      [created.session_id],
    );
    // ...but neither the value nor any part of it on either side of the NUL.
    for (const text of [session.error as string, sandbox!.error, JSON.stringify(session)]) {
      expect(text).not.toContain("ret-value-0123456789");
      expect(text).not.toMatch(/svc_pat_|svc_sk_/);
    }
  });
});
