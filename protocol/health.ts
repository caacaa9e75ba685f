import { z } from "zod";

export const ApiHealth = z.object({
  status: z.literal("ok"),
  version: z.string(),
  database: z.enum(["pglite", "postgres"]),
});
export type ApiHealth = z.infer<typeof ApiHealth>;
