import { randomBytes, scrypt, timingSafeEqual } from "node:crypto";

type Cost = { N: number; r: number; p: number };

/**
 * scrypt's cost for new hashes: N = 2^15, r = 8, p = 1 (32 MiB, some 50 ms here), OWASP's password storage guide's
 * floor. Stored with each hash, so raising it later leaves older hashes verifiable.
 */
const COST: Cost = { N: 2 ** 15, r: 8, p: 1 };
const SALT_BYTES = 16;
const KEY_BYTES = 32;

function derive(password: string, salt: Buffer, cost: Cost, length: number): Promise<Buffer> {
  // NFC: the same password typed on two systems that compose accents differently is the same password.
  // maxmem: scrypt's default limit (32 MiB) is exactly what N = 2^15 needs, and refuses it; twice that is room.
  const options = { ...cost, maxmem: 256 * cost.N * cost.r };
  return new Promise((resolve, reject) =>
    scrypt(password.normalize("NFC"), salt, length, options, (err, key) => (err ? reject(err) : resolve(key))),
  );
}

/** A new password's stored form: `scrypt$<N>$<r>$<p>$<salt>$<hash>`, with a fresh random salt each time. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const key = await derive(password, salt, COST, KEY_BYTES);
  return ["scrypt", COST.N, COST.r, COST.p, salt.toString("base64url"), key.toString("base64url")].join("$");
}

const STORED = /^scrypt\$(\d+)\$(\d+)\$(\d+)\$([\w-]+)\$([\w-]+)$/;

/** A hash no password matches, checked when there is no stored one: the time an answer takes tells nothing. */
let nobody: Promise<string> | undefined;

/**
 * Whether `password` is the one `stored` was made from, compared in constant time. No stored hash (no such user,
 * or one without a password) costs as long as a wrong password, and is one.
 */
export async function verifyPassword(password: string, stored: string | null | undefined): Promise<boolean> {
  const parsed = stored ? STORED.exec(stored) : null;
  nobody ??= hashPassword(randomBytes(16).toString("hex"));
  const [, n, r, p, salt, hash] = parsed ?? STORED.exec(await nobody)!;
  const expected = Buffer.from(hash!, "base64url");
  const cost = { N: Number(n), r: Number(r), p: Number(p) };
  const key = await derive(password, Buffer.from(salt!, "base64url"), cost, expected.length);
  return timingSafeEqual(key, expected) && parsed !== null;
}
