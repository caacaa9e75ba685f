/**
 * Read-through cache for hot lookups on every request (token, membership, project). Entries live `ttlMs`;
 * writers in this process delete what they change, so the TTL only bounds staleness across replicas.
 */
export function createTtlCache<K, V>(ttlMs: number, maxEntries = 10_000) {
  const entries = new Map<K, { at: number; value: Promise<V> }>();
  return {
    get(key: K, load: () => Promise<V>): Promise<V> {
      const hit = entries.get(key);
      if (hit && Date.now() - hit.at < ttlMs) return hit.value;
      const value = load();
      entries.set(key, { at: Date.now(), value });
      value.catch(() => entries.delete(key));
      if (entries.size > maxEntries) entries.delete(entries.keys().next().value as K);
      return value;
    },
    delete(key: K): void {
      entries.delete(key);
    },
    /** Drops every entry whose value matches: e.g. all cached lookups of one revoked token. */
    async deleteWhere(match: (value: V) => boolean): Promise<void> {
      for (const [key, entry] of entries) {
        const value = await entry.value.catch(() => undefined);
        if (value !== undefined && match(value)) entries.delete(key);
      }
    },
  };
}
