-- Every token expires (issue 26). Tokens minted before this had none: they get 30 days from now, as a browser login
-- does, and no token can be stored without an expiry from here on. The self-host admin token is renewed by each
-- API start anyway (api/accounts/bootstrap.ts).
update tokens set expires_at = now() + interval '30 days' where expires_at is null;
alter table tokens alter column expires_at set not null;
