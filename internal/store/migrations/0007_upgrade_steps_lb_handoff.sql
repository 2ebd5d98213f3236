-- The load-balancer hand-off step: a control-plane server leaving the
-- cluster's API load balancer before Cluster API deletes its machine, or a
-- new one joining it, and each failed attempt.
ALTER TABLE upgrade_steps DROP CONSTRAINT upgrade_steps_kind_known;
ALTER TABLE upgrade_steps ADD CONSTRAINT upgrade_steps_kind_known
    CHECK (kind IN ('preflight', 'wire-mvp', 'bump', 'machine', 'verify', 'soak', 'lb-handoff'));
