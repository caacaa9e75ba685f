-- What a provisioning session is doing now (`building image: step 2/5 RUN make`, `cloning workspace`), for the
-- spinner of `svc sessions new`; null once it leaves provisioning.
alter table project_sessions add column progress text;
