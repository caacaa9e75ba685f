-- People (issue 32): a password per user and invitations into an account.
-- A password is stored as one self-describing scrypt string, `scrypt$<N>$<r>$<p>$<salt>$<hash>`
-- (api/people/passwords.ts): the parameters travel with each hash, so raising them later leaves older hashes
-- verifiable. Null: the user has no password (the self-host admin, a user who signs in otherwise).
alter table users add column password_hash text;

-- An invitation: a one-time link for one email, into one account, with one role, for 7 days. Only a SHA-256 of
-- the link's token is stored, as for every credential.
create table account_invites (
  id uuid primary key default gen_random_uuid(),
  token_hash text not null unique,
  account_id uuid not null references accounts(id) on delete cascade,
  email text not null,
  role text not null check (role in ('owner', 'admin', 'member', 'viewer')),
  created_by uuid references users(id) on delete set null,
  expires_at timestamptz not null,
  used_at timestamptz,
  used_by uuid references users(id) on delete set null,
  created_at timestamptz not null default now()
);
create index account_invites_account_email_idx on account_invites(account_id, email);

-- Password sign-in tries of the last minute, by SHA-256 of `email:<email>` and of `address:<client address>`:
-- shared by every API process of the database, so replicas do not multiply the limit. Swept as it is read.
create table sign_in_attempts (
  id uuid primary key default gen_random_uuid(),
  key_hash text not null,
  at timestamptz not null default now()
);
create index sign_in_attempts_key_idx on sign_in_attempts(key_hash, at);
