-- Session tokens: an API token made from another one for a dashboard
-- sign-in. It acts as its parent does, ends at expires_at, ends when its
-- parent is revoked, and signing out revokes it, so a copied session
-- cookie stops working then.
ALTER TABLE api_tokens
    ADD COLUMN parent_id  uuid REFERENCES api_tokens (id) ON DELETE CASCADE,
    ADD COLUMN expires_at timestamptz,
    ADD CONSTRAINT api_tokens_session_expires
        CHECK (parent_id IS NULL OR expires_at IS NOT NULL);
CREATE INDEX api_tokens_parent_id_idx ON api_tokens (parent_id);
