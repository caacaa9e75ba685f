import { usageError } from "./errors.ts";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** `<cr>` is `3`, `#3` or the cr_id. */
export function parseCrRef(ref: string): string {
  const number = /^#?(\d{1,9})$/.exec(ref);
  if (number && Number(number[1]) > 0) return number[1]!;
  if (UUID.test(ref)) return ref.toLowerCase();
  throw usageError(`'${ref}' is not a change request: use its number (3 or #3) or its id`);
}

/** A parsed `<cr>` as other commands print a CR: `#3`, or the id it was given by. */
export const crLabel = (parsed: string) => (UUID.test(parsed) ? parsed : `#${parsed}`);
