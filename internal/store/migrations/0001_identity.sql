-- Tenants, the people who act for them or for the platform, and how they
-- prove it: API tokens (hashed) and SSH keys.

CREATE TABLE tenants (
    id         uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    -- A DNS label (RFC 1123): it becomes a namespace and part of hostnames.
    name       text        NOT NULL UNIQUE
               CONSTRAINT tenants_name_dns_label
               CHECK (name ~ '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$'),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE users (
    id            uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    -- NULL for operators, who belong to the platform rather than a tenant.
    tenant_id     uuid        REFERENCES tenants (id) ON DELETE CASCADE,
    email         text        NOT NULL,
    role          text        NOT NULL
                  CONSTRAINT users_role_known CHECK (role IN ('tenant', 'operator')),
    -- An encoded password hash (argon2id, bcrypt, ...); NULL when the user
    -- cannot log in with a password.
    password_hash text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT users_tenant_matches_role
        CHECK ((role = 'operator') = (tenant_id IS NULL)),
    -- Lets api_tokens check that a token's user belongs to its tenant.
    CONSTRAINT users_tenant_id_id_key UNIQUE (tenant_id, id)
);
CREATE UNIQUE INDEX users_email_key ON users (lower(email));

CREATE TABLE api_tokens (
    id           uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    -- NULL only for an operator's token.
    tenant_id    uuid        REFERENCES tenants (id) ON DELETE CASCADE,
    user_id      uuid        REFERENCES users (id) ON DELETE CASCADE,
    name         text        NOT NULL CHECK (name <> ''),
    -- The first characters of the secret, to tell tokens apart in lists.
    prefix       text        NOT NULL,
    -- SHA-256 of the secret; the secret itself is never stored.
    hash         bytea       NOT NULL UNIQUE CHECK (octet_length(hash) = 32),
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz,
    CONSTRAINT api_tokens_owner CHECK (tenant_id IS NOT NULL OR user_id IS NOT NULL),
    -- MATCH SIMPLE: checked only when both are set.
    CONSTRAINT api_tokens_user_in_tenant
        FOREIGN KEY (tenant_id, user_id) REFERENCES users (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX api_tokens_tenant_id_idx ON api_tokens (tenant_id);
CREATE INDEX api_tokens_user_id_idx ON api_tokens (user_id);

CREATE TABLE ssh_keys (
    id          uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id   uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name        text        NOT NULL CHECK (name <> ''),
    -- SHA256:<base64>, as ssh-keygen -l prints it. Unique across tenants, so
    -- that a key pushing over SSH names exactly one tenant.
    fingerprint text        NOT NULL UNIQUE CHECK (fingerprint LIKE 'SHA256:%'),
    -- The key in authorized_keys form, without options.
    public_key  text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ssh_keys_tenant_id_name_key UNIQUE (tenant_id, name)
);
