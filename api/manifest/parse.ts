// The parser lives in protocol/ so that the CLI (`svc ship`) checks a manifest exactly as the API reads it.
export { parseManifest } from "../../protocol/manifest-parse.ts";
