import type { FastifyInstance } from "fastify";
import type { SecretList } from "../../protocol/secret.ts";
import { SetSecretsBody, UnsetSecretsBody } from "../../protocol/secret.ts";
import type { Events } from "../events.ts";
import { parseInput } from "../http/validate.ts";
import type { ManifestReader } from "../manifest/reader.ts";
import { listSecrets } from "./listing.ts";
import type { SecretStore } from "./store.ts";

export function secretRoutes(deps: { secrets: SecretStore; manifests: ManifestReader; events: Events }) {
  return async (app: FastifyInstance) => {
    app.get("/v1/projects/:projectId/secrets", async (req): Promise<SecretList> => listSecrets(deps, req.project!));

    app.put("/v1/projects/:projectId/secrets", async (req) => {
      const body = parseInput(SetSecretsBody, req.body, "body");
      const revision = await deps.secrets.set(req.project!.id, body.secrets);
      deps.events.emit("secrets.changed", { projectId: req.project!.id, unset: [] });
      return { names: Object.keys(body.secrets).sort(), revision };
    });

    app.delete("/v1/projects/:projectId/secrets", async (req) => {
      const body = parseInput(UnsetSecretsBody, req.body, "body");
      const result = await deps.secrets.unset(req.project!.id, body.names);
      deps.events.emit("secrets.changed", { projectId: req.project!.id, unset: body.names });
      return result;
    });
  };
}
