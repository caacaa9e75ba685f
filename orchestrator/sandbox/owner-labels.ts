import type { AppOwner, SandboxOwner } from "./driver.ts";

/** Docker labels that record a sandbox's owner; `docker ps --filter label=dev.svc.session=<id>` finds one. */
export const OWNER_LABELS: Record<keyof SandboxOwner, string> = {
  installationId: "dev.svc.installation",
  sandboxId: "dev.svc.sandbox",
  sessionId: "dev.svc.session",
  projectId: "dev.svc.project",
};

/** A warm-pool sandbox's label: the API process holding it (SandboxSpec.pool). */
export const POOL_LABEL = "dev.svc.pool";

/** An app container's labels: the installation and project as a sandbox's, then its app and deploy. */
export const APP_LABELS: Record<keyof AppOwner, string> = {
  installationId: OWNER_LABELS.installationId,
  projectId: OWNER_LABELS.projectId,
  app: "dev.svc.app",
  deployId: "dev.svc.deploy",
};

const labelsOf = <T extends Record<string, string>>(names: Record<keyof T, string>, owner: T) =>
  Object.fromEntries(Object.entries(names).map(([field, label]) => [label as string, owner[field as keyof T]]));

function ownerOf<T extends Record<string, string>>(
  names: Record<keyof T, string>,
  labels: Record<string, string> | undefined,
): Partial<T> {
  const owner: Partial<T> = {};
  for (const [field, label] of Object.entries(names) as [keyof T, string][]) {
    const value = labels?.[label];
    if (value) owner[field] = value as T[keyof T];
  }
  return owner;
}

export const toLabels = (owner: SandboxOwner) => labelsOf(OWNER_LABELS, owner);
export const toOwner = (labels: Record<string, string> | undefined) => ownerOf<SandboxOwner>(OWNER_LABELS, labels);
export const toAppLabels = (owner: AppOwner) => labelsOf(APP_LABELS, owner);
export const toAppOwner = (labels: Record<string, string> | undefined) => ownerOf<AppOwner>(APP_LABELS, labels);
