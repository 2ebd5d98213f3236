-- The release step: a control-plane Machine KubeadmControlPlane chose for
-- deletion, released to Cluster API once its gate (the FleetUpgrade's
-- pre-drain deletion hook) passed.
ALTER TABLE upgrade_steps DROP CONSTRAINT upgrade_steps_kind_known;
ALTER TABLE upgrade_steps ADD CONSTRAINT upgrade_steps_kind_known
    CHECK (kind IN ('preflight', 'wire-mvp', 'bump', 'machine', 'verify', 'soak', 'lb-handoff', 'release'));
