import type { Project } from "../../protocol/project.ts";
import type { SecretList } from "../../protocol/secret.ts";
import type { ManifestReader } from "../manifest/reader.ts";
import type { SecretStore } from "./store.ts";

/** A project's secret names beside what its manifest's `[env]` expects: the REST listing and the dashboard's. */
export async function listSecrets(
  deps: { secrets: SecretStore; manifests: ManifestReader },
  project: Project,
): Promise<SecretList> {
  const [list, read] = await Promise.all([deps.secrets.list(project.id), deps.manifests.read(project)]);
  const env = Object.fromEntries(
    Object.entries(read.manifest.env).map(([name, spec]) => [
      name,
      { required: spec.required, ...(spec.description !== undefined ? { description: spec.description } : {}) },
    ]),
  );
  return { ...list, env, manifest_commit: read.commit, manifest_error: read.error };
}
