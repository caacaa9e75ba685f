import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { PGLITE_TEMPLATE_FILE, packageRoot } from "../../../protocol/package-root.ts";
import { LOCAL_BASE_IMAGE } from "../../../protocol/stack-settings.ts";
import { CliError } from "../../errors.ts";
import { type ComposeRun, compose } from "./compose.ts";
import { dockerGet } from "./docker-engine.ts";

/** Compose variables (not API settings) that `env set` may hold: public images where a registry answers. */
export const IMAGE_VARIABLES = ["SVC_BASE_IMAGE", "SVC_NODE_IMAGE", "SVC_POSTGRES_IMAGE"] as const;

export type Progress = (text: string) => void;

type ImageInfo = { Id: string; Config?: { Labels?: Record<string, string> | null } };

async function inspectImage(name: string): Promise<ImageInfo | undefined> {
  const res = await dockerGet(`/images/${encodeURIComponent(name)}/json`);
  if ("error" in res) throw new CliError(`the Docker engine did not answer: ${res.error}`);
  return res.status === 200 ? (JSON.parse(res.body) as ImageInfo) : undefined;
}

const imageId = async (name: string) => (await inspectImage(name))?.Id;

/** The files an image takes from `dir`: what .dockerignore leaves out (source maps, the PGlite template) counts not. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && !e.name.endsWith(".map") && e.name !== PGLITE_TEMPLATE_FILE)
    .map((e) => join(e.parentPath, e.name))
    .sort();
}

/** A key over everything an image is built from: its tag changes exactly when a rebuild is due. */
function contentKey(parts: string[], files: string[], bigFiles: string[] = []): string {
  const hash = createHash("sha256");
  for (const part of parts) hash.update(`${part}\0`);
  for (const file of files) hash.update(`${file}\0`).update(readFileSync(file));
  // Large binaries count by size and time: hashing 180 MB on every start would cost seconds.
  for (const file of bigFiles) {
    const st = statSync(file);
    hash.update(`${file}\0${st.size}:${st.mtimeMs}`);
  }
  return hash.digest("hex").slice(0, 16);
}

/** Runs one of scripts/images/ with this node first on PATH (the node image packs the node that runs svc). */
function runScript(script: string, args: string[], env: Record<string, string>): Promise<string> {
  return new Promise((done, fail) => {
    const child = spawn("bash", [join(packageRoot(), "scripts", "images", script), ...args], {
      env: { ...env, PATH: `${dirname(process.execPath)}:${env.PATH ?? ""}` },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const out: string[] = [];
    child.stdout.on("data", (d: Buffer) => out.push(d.toString()));
    child.stderr.on("data", (d: Buffer) => out.push(d.toString()));
    child.on("error", fail);
    child.on("close", (code) =>
      code === 0 ? done(out.join("")) : fail(new CliError(`scripts/images/${script} failed:\n${out.join("").trim()}`)),
    );
  });
}

const STEP = /^Step (\d+\/\d+) : (.*)$/;

/** `compose build <service>`, telling each step as it starts; a failure shows the build's last lines. */
async function build(run: ComposeRun, service: string, tag: string, progress: Progress): Promise<void> {
  const started = Date.now();
  progress(`building the ${service} image ${tag}…`);
  const result = await compose(run, ["build", service], (line) => {
    const step = STEP.exec(line.trim());
    if (step) progress(`building the ${service} image ${tag}: step ${step[1]} ${step[2]!.slice(0, 60)}`);
  });
  if (result.code !== 0) {
    const tail = result.output.trim().split("\n").slice(-25).join("\n");
    throw new CliError(`building the ${service} image failed:\n${tail}`);
  }
  progress(`✓ built ${tag} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

/**
 * Builds what the stack lacks and returns the compose variables naming the images: the local base and node images
 * (scripts/images/), PostgreSQL's and the API's, each tagged by a key of its inputs so an unchanged checkout never
 * rebuilds. A public image named with `env set SVC_POSTGRES_IMAGE=postgres:15` (and the like) is pulled instead.
 */
export async function ensureComposeImages(
  run: ComposeRun,
  chosen: Partial<Record<(typeof IMAGE_VARIABLES)[number], string>>,
  progress: Progress,
): Promise<Record<string, string>> {
  const root = packageRoot();
  const vars: Record<string, string> = {};
  const base = chosen.SVC_BASE_IMAGE ?? LOCAL_BASE_IMAGE;
  vars.SVC_BASE_IMAGE = base;
  let baseId = await imageId(base);
  if (!baseId) {
    if (base !== LOCAL_BASE_IMAGE) throw new CliError(`the base image ${base} is not on this engine: docker pull it`);
    progress(`building the base image ${base} from this machine's Debian mirror…`);
    await runScript("base-image.sh", [base], run.env);
    baseId = (await imageId(base)) ?? base;
  }
  const node = chosen.SVC_NODE_IMAGE ?? `svc-node:${process.versions.node.split(".")[0]}`;
  vars.SVC_NODE_IMAGE = node;
  let nodeImage = await inspectImage(node);
  // The local node image records the version it packs (scripts/images/node-image.sh): re-packed when node changed.
  if (!chosen.SVC_NODE_IMAGE && nodeImage?.Config?.Labels?.["dev.svc.node"] !== process.versions.node) {
    await runScript("node-image.sh", [node], run.env);
    nodeImage = await inspectImage(node);
  }
  if (!nodeImage) throw new CliError(`the node image ${node} is not on this engine: docker pull it`);

  // Compose reads the images' names from its environment: the ones chosen so far.
  const withVars = () => ({ ...run, env: { ...run.env, ...vars } });
  if (chosen.SVC_POSTGRES_IMAGE) {
    vars.SVC_POSTGRES_IMAGE = chosen.SVC_POSTGRES_IMAGE;
    if (!(await imageId(chosen.SVC_POSTGRES_IMAGE))) {
      progress(`pulling ${chosen.SVC_POSTGRES_IMAGE}…`);
      const pulled = await compose(withVars(), ["pull", "postgres"]);
      if (pulled.code !== 0)
        throw new CliError(`pulling ${chosen.SVC_POSTGRES_IMAGE} failed:\n${pulled.output.trim()}`);
    }
  } else {
    const key = contentKey([baseId], filesUnder(join(root, "images", "postgres")));
    vars.SVC_POSTGRES_IMAGE = `svc-postgres:15-${key}`;
    if (!(await imageId(vars.SVC_POSTGRES_IMAGE))) {
      await build(withVars(), "postgres", vars.SVC_POSTGRES_IMAGE, progress);
    }
  }

  const apiKey = contentKey(
    [baseId, nodeImage.Id],
    [
      ...filesUnder(join(root, "dist")),
      ...filesUnder(join(root, "images")),
      join(root, "package-lock.json"),
      join(root, ".dockerignore"),
    ],
    [join(root, "node_modules", "opencode-linux-x64", "bin", "opencode")],
  );
  vars.SVC_API_TAG = apiKey;
  if (!(await imageId(`svc-api:${apiKey}`))) {
    await build(withVars(), "api", `svc-api:${apiKey}`, progress);
  }
  return vars;
}
