/** Commander argument parsers: a bad value is a usage error (exit 2) that names the flag or argument. */
import { InvalidArgumentError } from "commander";
import { CommitSha } from "../protocol/change-request.ts";

export function parsePort(value: string): number {
  const port = Number(value);
  if (!/^\d+$/.test(value) || port < 1 || port > 65535)
    throw new InvalidArgumentError("must be a port number (1-65535)");
  return port;
}

export function parsePositiveInt(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < 1) throw new InvalidArgumentError("must be a positive integer");
  return n;
}

export function parseCommitSha(value: string): string {
  if (!CommitSha.safeParse(value).success) throw new InvalidArgumentError("must be a full commit id (40 hex digits)");
  return value;
}
