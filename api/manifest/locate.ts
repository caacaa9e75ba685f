// Moved to protocol/ with the manifest parser that uses it (the CLI checks manifests too).
export { formatKeyPath, type KeyPath, keyLines, locate } from "../../protocol/manifest-locate.ts";
