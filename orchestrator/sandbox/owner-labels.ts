import type { SandboxOwner } from "./driver.ts";

/** Docker labels that record a sandbox's owner; `docker ps --filter label=dev.svc.session=<id>` finds one. */
export const OWNER_LABELS: Record<keyof SandboxOwner, string> = {
  installationId: "dev.svc.installation",
  sandboxId: "dev.svc.sandbox",
  sessionId: "dev.svc.session",
  projectId: "dev.svc.project",
};

export const toLabels = (owner: SandboxOwner) =>
  Object.fromEntries(Object.entries(OWNER_LABELS).map(([field, label]) => [label, owner[field as keyof SandboxOwner]]));

export function toOwner(labels: Record<string, string> | undefined): Partial<SandboxOwner> {
  const owner: Partial<SandboxOwner> = {};
  for (const [field, label] of Object.entries(OWNER_LABELS)) {
    const value = labels?.[label];
    if (value) owner[field as keyof SandboxOwner] = value;
  }
  return owner;
}
