import { ApiError } from "../errors.ts";

/** A page section's data, or why it could not be read (no sandbox driver, no secrets key, repository down). */
export type Part<T> = { ok: true; value: T } | { ok: false; reason: string };

/** The section's data, or the API's refusal in words; anything else is a real failure and propagates. */
export async function settle<T>(work: Promise<T>): Promise<Part<T>> {
  try {
    return { ok: true, value: await work };
  } catch (err) {
    if (err instanceof ApiError) return { ok: false, reason: err.message };
    throw err;
  }
}
