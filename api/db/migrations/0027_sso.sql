-- Single sign-on through an OpenID Connect provider (issue 32).
-- Who a person is at a provider: the ID token's (iss, sub), which stays theirs whatever their email becomes there.
-- One identity per user and provider, so an email the provider later hands to someone else signs nobody in as them.
create table user_identities (
  issuer text not null,
  subject text not null,
  user_id uuid not null references users(id) on delete cascade,
  created_at timestamptz not null default now(),
  primary key (issuer, subject),
  unique (user_id, issuer)
);

-- Sign-ins under way, between the redirect to the provider and its redirect back: the browser holds a random handle
-- in a cookie and only its SHA-256 is here, beside what the callback checks (state, nonce, the PKCE verifier) and
-- where it lands. Minutes, single use (deleted as it is read), so a replayed callback finds nothing.
create table sso_sign_ins (
  handle_hash text primary key,
  state text not null,
  nonce text not null,
  code_verifier text not null,
  next text not null,
  expires_at timestamptz not null,
  created_at timestamptz not null default now()
);
create index sso_sign_ins_expiry_idx on sso_sign_ins(expires_at);
