import type { z } from "zod";
import { apiError } from "../errors.ts";

/** Parses request input; the first issue becomes a 400 naming the field. */
export function parseInput<S extends z.ZodType>(
  schema: S,
  value: unknown,
  where: "body" | "query" | "params",
): z.infer<S> {
  const result = schema.safeParse(value ?? (where === "body" ? undefined : {}));
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const field = issue.path.join(".");
  if (issue.code === "unrecognized_keys") {
    const keys = issue.keys.join(", ");
    throw apiError("VALIDATION_FAILED", `unknown ${where} field: ${keys}`, { field: issue.keys[0] });
  }
  if (field === "") {
    const message =
      value === undefined || value === null ? `request ${where} is required` : `${where}: ${issue.message}`;
    throw apiError("VALIDATION_FAILED", message);
  }
  throw apiError("VALIDATION_FAILED", `${field}: ${issue.message}`, { field });
}
