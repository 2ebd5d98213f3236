-- The verifier's Unserved outcome: a resource that a server's merged
-- discovery still lists for a peer that is gone, and that nobody serves any
-- more. It is recorded like the others; it is not a failure.
ALTER TABLE upgrade_probes DROP CONSTRAINT upgrade_probes_outcome_known;
ALTER TABLE upgrade_probes ADD CONSTRAINT upgrade_probes_outcome_known
    CHECK (outcome IN ('ServedLocally', 'Proxied', 'Spurious404', 'Honest503', 'Error', 'Unserved'));
