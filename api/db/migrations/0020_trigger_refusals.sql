-- A trigger's last refused firing (the session cap, any error): when and why, kept after later sessions.
-- From here on `last_fired_at` moves only when a firing started a session.
alter table trigger_state add column last_refused_at timestamptz;
alter table trigger_state add column last_refusal text;

-- Before, a refusal moved `last_fired_at` as a session did. Each trigger's latest refusal is on its firings' rows;
-- a trigger whose latest firing was refused (`last_error` set) gets back the time of its latest firing that was not.
update trigger_state s set last_refused_at = r.created_at, last_refusal = r.error
  from (select distinct on (project_id, slug) project_id, slug, created_at, error from trigger_firings
        where error is not null order by project_id, slug, created_at desc) r
  where r.project_id = s.project_id and r.slug = s.slug;
update trigger_state s set last_fired_at = (select max(f.created_at) from trigger_firings f
    where f.project_id = s.project_id and f.slug = s.slug and f.error is null)
  where s.last_error is not null;
