-- What certmagic keeps for the edge router (internal/certstore): certificates,
-- their private keys and metadata, ACME accounts, OCSP staples, as values
-- under slash-separated keys; and the locks with which edge replicas make
-- sure a certificate is obtained once, not once per replica.

CREATE TABLE certmagic_keys (
    -- A path such as certificates/<issuer>/<domain>/<domain>.crt: components
    -- separated by single slashes, none empty. "Directories" are not rows;
    -- they are the prefixes of keys. Collation C makes the byte-wise range
    -- [dir || '/', dir || '0') select exactly what lies under dir, by index.
    key      text        COLLATE "C" PRIMARY KEY
             CONSTRAINT certmagic_keys_key_path CHECK (key ~ '^[^/]+(/[^/]+)*$'),
    value    bytea       NOT NULL,
    -- Set by the database on every store, so that all replicas use one clock.
    modified timestamptz NOT NULL DEFAULT now()
);

-- One row per held lock. A lock is held while expires is in the future; its
-- holder pushes expires forward while it works, and anyone may take over a
-- row whose expires has passed (its holder died or lost the database).
CREATE TABLE certmagic_locks (
    name      text        PRIMARY KEY CHECK (name <> ''),
    -- Random, per acquisition: refresh and release apply only to the
    -- holder's own acquisition, never to a successor's.
    token     text        NOT NULL CHECK (token <> ''),
    -- Who holds it, for people reading the table: <host>/<pid> by default.
    holder    text        NOT NULL DEFAULT '',
    locked_at timestamptz NOT NULL DEFAULT now(),
    expires   timestamptz NOT NULL
);
