import { type PGlite, parse, protocol } from "@electric-sql/pglite";

type RowDescription = InstanceType<typeof protocol.messages.RowDescriptionMessage>;
type Statement = { name: string; paramTypes: number[]; rows: RowDescription | undefined };

// Texts are the code's own (a few dynamic ones vary by which columns change): past this, run unprepared.
const MAX_STATEMENTS = 500;

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

const BIND = 0x42; // 'B'
const DATA_ROW = 0x44; // 'D'
const ERROR_RESPONSE = 0x45; // 'E'
// Execute (unnamed portal, all rows) and Sync.
const EXECUTE_SYNC = Buffer.from([0x45, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0x53, 0, 0, 0, 4]);

/**
 * Bind (unnamed portal, text parameters and results), Execute and Sync as one message, written straight into one
 * buffer: PGlite's serializer builds each message in a growing buffer of its own, which a call per request feels.
 */
function bindExecuteSync(statement: string, values: (string | null)[]): Buffer {
  const name = Buffer.from(statement, "utf8");
  const encoded = values.map((value) => (value === null ? null : Buffer.from(value, "utf8")));
  const length = 4 + 1 + name.length + 1 + 2 + 2 + encoded.reduce((n, v) => n + 4 + (v?.length ?? 0), 0) + 2;
  const out = Buffer.allocUnsafe(1 + length + EXECUTE_SYNC.length);
  let at = out.writeUInt8(BIND, 0);
  at = out.writeInt32BE(length, at);
  at = out.writeUInt8(0, at);
  at += name.copy(out, at);
  at = out.writeUInt8(0, at);
  at = out.writeInt16BE(0, at);
  at = out.writeInt16BE(encoded.length, at);
  for (const value of encoded) {
    at = out.writeInt32BE(value ? value.length : -1, at);
    if (value) at += value.copy(out, at);
  }
  at = out.writeInt16BE(0, at);
  EXECUTE_SYNC.copy(out, at);
  return out;
}

/** The first error of a response, parsed by PGlite's own protocol parser so it is the error `query()` throws. */
function databaseError(response: Buffer): Error {
  let error: Error | undefined;
  new protocol.Parser().parse(response, (message) => {
    if (!error && message instanceof protocol.messages.DatabaseError) error = message;
  });
  return error ?? new Error("PGlite answered with an error it did not describe");
}

/**
 * The rows of one Bind/Execute/Sync response. PGlite's parser copies every field into an ArrayBuffer of its own
 * before decoding it; a row here is decoded in place, then parsed by the engine's type parsers like `query()`.
 */
function readRows<T>(response: Buffer, description: RowDescription | undefined, parsers: PGlite["parsers"]): T[] {
  const rows: T[] = [];
  const fields = description?.fields ?? [];
  for (let offset = 0; offset < response.length; offset += 1 + response.readInt32BE(offset + 1)) {
    const type = response[offset];
    if (type === ERROR_RESPONSE) throw databaseError(response);
    if (type !== DATA_ROW) continue;
    const row: Record<string, unknown> = {};
    let at = offset + 7;
    for (const field of fields) {
      const length = response.readInt32BE(at);
      at += 4;
      if (length === -1) {
        row[field.name] = null;
        continue;
      }
      const text = response.toString("utf8", at, at + length);
      at += length;
      const parser = parsers[field.dataTypeID];
      row[field.name] = parser ? parser(text, field.dataTypeID) : text;
    }
    rows.push(row as T);
  }
  return rows;
}

/**
 * PGlite's `query()` parses, describes and plans its text on every call, in six round trips into the engine;
 * that is most of a small request's time. Here each distinct text becomes a named prepared statement once, and
 * every later call is one Bind + Execute + Sync round trip, as postgres.js does against a server.
 * Parameters are serialized and rows parsed exactly as `query()` does, with the engine's types.
 */
export function createPgliteStatements(db: PGlite) {
  const statements = new Map<string, Statement>();
  let counter = 0;

  async function prepare(text: string): Promise<Statement | undefined> {
    const known = statements.get(text);
    if (known || statements.size >= MAX_STATEMENTS) return known;
    const name = `svc_${++counter}`;
    const messages = await db.execProtocolStream(
      concat([
        protocol.serialize.parse({ name, text }),
        protocol.serialize.describe({ type: "S", name }),
        protocol.serialize.sync(),
      ]),
      { syncToFs: false },
    );
    const statement: Statement = {
      name,
      paramTypes: parse.parseDescribeStatementResults(messages),
      rows: messages.find((m): m is RowDescription => m.name === "rowDescription"),
    };
    statements.set(text, statement);
    return statement;
  }

  async function run<T>(text: string, params: unknown[], inTx: boolean): Promise<T[] | undefined> {
    const statement = await prepare(text);
    if (!statement) return undefined;
    const values = params.map((param, i) => {
      if (param === null || param === undefined) return null;
      const serialize = db.serializers[statement.paramTypes[i]!];
      return String(serialize ? serialize(param) : param);
    });
    const chunks: Buffer[] = [];
    await db.execProtocolRawStream(
      bindExecuteSync(statement.name, values),
      // A view into the engine's memory, reused by the next write: copied at once.
      { syncToFs: !inTx, onRawData: (bytes) => chunks.push(Buffer.from(bytes)) },
    );
    return readRows<T>(Buffer.concat(chunks), statement.rows, db.parsers);
  }

  return {
    /** Undefined when the statement cache is full: the caller then runs `query()`. */
    async query<T>(text: string, params: unknown[], inTx: boolean): Promise<T[] | undefined> {
      await db._checkReady();
      // Inside a transaction its owner already holds the transaction lock, as PGlite's own tx.query assumes.
      const locked = () => db._runExclusiveQuery(() => run<T>(text, params, inTx));
      return inTx ? locked() : db._runExclusiveTransaction(locked);
    },

    /** After DDL, on the connection that ran it: a statement's described rows may no longer match its table. */
    async forget(conn: Pick<PGlite, "exec">): Promise<void> {
      if (statements.size === 0) return;
      statements.clear();
      await conn.exec("deallocate all");
    },
  };
}
