import type { AppOwner, SandboxOwner } from "./driver.ts";

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

/** An app container's labels: the installation and project as a sandbox's, then its app and deploy. */
export const APP_LABELS: Record<keyof AppOwner, string> = {
  installationId: OWNER_LABELS.installationId,
  projectId: OWNER_LABELS.projectId,
  app: "dev.svc.app",
  deployId: "dev.svc.deploy",
};

export const toAppLabels = (owner: AppOwner) =>
  Object.fromEntries(Object.entries(APP_LABELS).map(([field, label]) => [label, owner[field as keyof AppOwner]]));

export function toAppOwner(labels: Record<string, string> | undefined): Partial<AppOwner> {
  const owner: Partial<AppOwner> = {};
  for (const [field, label] of Object.entries(APP_LABELS)) {
    const value = labels?.[label];
    if (value) owner[field as keyof AppOwner] = value;
  }
  return owner;
}
