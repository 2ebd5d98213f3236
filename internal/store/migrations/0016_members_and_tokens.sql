-- Members of a tenant with roles, personal tokens with scopes and expiry,
-- SSH keys that belong to a member, and invitations.

-- A tenant's users are its members, each with a role: admin (everything,
-- members and tokens included), developer (push, deploy, env, scale,
-- restart, rollback, logs, routes) or viewer (read only). The users of the
-- old role 'tenant' acted for their tenant in full: they become admins.
ALTER TABLE users DROP CONSTRAINT users_role_known;
ALTER TABLE users DROP CONSTRAINT users_tenant_matches_role;
UPDATE users SET role = 'admin' WHERE role = 'tenant';
ALTER TABLE users
    ADD CONSTRAINT users_role_known
        CHECK (role IN ('admin', 'developer', 'viewer', 'operator')),
    ADD CONSTRAINT users_tenant_matches_role
        CHECK ((role = 'operator') = (tenant_id IS NULL));
CREATE INDEX users_tenant_id_idx ON users (tenant_id);

-- A token's scope narrows what it may do below its owner's role (a
-- machine token, with no user, acts as an admin would): full keeps the
-- role, write caps it at developer, read at viewer. A session token has its
-- parent's scope. expires_at, which sessions had already, may now end any
-- token.
ALTER TABLE api_tokens
    ADD COLUMN scope text NOT NULL DEFAULT 'full'
        CONSTRAINT api_tokens_scope_known CHECK (scope IN ('full', 'write', 'read'));

-- An SSH key added by a member is theirs: a push with it acts with their
-- role at the time of the push, and it goes with them when they are
-- removed. NULL: a key of the tenant's (added with a machine token), which
-- may push.
ALTER TABLE ssh_keys
    ADD COLUMN user_id uuid,
    ADD CONSTRAINT ssh_keys_user_in_tenant
        FOREIGN KEY (tenant_id, user_id) REFERENCES users (tenant_id, id) ON DELETE CASCADE;
CREATE INDEX ssh_keys_user_id_idx ON ssh_keys (user_id);

-- An invitation to join a tenant with a role. Its code is answered once
-- and kept as its SHA-256; it is good until expires_at, and once.
CREATE TABLE invitations (
    id          uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id   uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    email       text        NOT NULL,
    role        text        NOT NULL
                CONSTRAINT invitations_role_known CHECK (role IN ('admin', 'developer', 'viewer')),
    -- The first characters of the code, to tell invitations apart.
    prefix      text        NOT NULL,
    hash        bytea       NOT NULL UNIQUE CHECK (octet_length(hash) = 32),
    -- Who invited: the audit log's actor.
    invited_by  text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    accepted_at timestamptz,
    revoked_at  timestamptz
);
CREATE INDEX invitations_tenant_id_idx ON invitations (tenant_id);
