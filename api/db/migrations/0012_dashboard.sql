-- The dashboard's browser sign-in: one-time codes that a sign-in link carries (minutes, single use) and the
-- browser sessions they open. Only SHA-256 hashes are stored, as for every other credential.
create table dashboard_sign_in_codes (
  code_hash text primary key,
  user_id uuid not null references users(id) on delete cascade,
  expires_at timestamptz not null,
  created_at timestamptz not null default now()
);
create index dashboard_sign_in_codes_expiry_idx on dashboard_sign_in_codes(expires_at);

create table dashboard_sessions (
  id uuid primary key default gen_random_uuid(),
  token_hash text not null unique,
  user_id uuid not null references users(id) on delete cascade,
  expires_at timestamptz not null,
  created_at timestamptz not null default now()
);
create index dashboard_sessions_expiry_idx on dashboard_sessions(expires_at);
