/** Timestamps leave the API as ISO-8601 strings whatever the driver hands back. */
export function iso(value: Date | string): string;
export function iso(value: Date | string | null): string | null;
export function iso(value: Date | string | null): string | null {
  if (value === null) return null;
  return (value instanceof Date ? value : new Date(value)).toISOString();
}

export function isUniqueViolation(err: unknown, constraint?: string): boolean {
  const e = err as { code?: string; constraint?: string; constraint_name?: string };
  if (e?.code !== "23505") return false;
  return constraint === undefined || e.constraint === constraint || e.constraint_name === constraint;
}
