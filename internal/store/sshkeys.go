package store

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/crypto/ssh"
)

// minRSABits is the smallest RSA key accepted, as in OpenSSH.
const minRSABits = 2048

// SSHKey is a public key with which a tenant's member pushes over SSH.
type SSHKey struct {
	ID       string `json:"id"`
	TenantID string `json:"tenantID"`
	// UserID is the member who added the key, whose role a push with it
	// has; empty for a key of the tenant's, added with a machine token.
	UserID string `json:"userID,omitempty"`
	Name   string `json:"name"`
	// Fingerprint is "SHA256:" and the unpadded base64 of the key's
	// SHA-256, as ssh-keygen -l prints it. It is unique across tenants.
	Fingerprint string `json:"fingerprint"`
	// PublicKey is the key in authorized_keys form: type, base64 and
	// comment, without options.
	PublicKey string    `json:"publicKey"`
	CreatedAt time.Time `json:"createdAt"`
}

const sshKeyColumns = "id, tenant_id, user_id, name, fingerprint, public_key, created_at"

func scanSSHKey(row pgx.Row) (SSHKey, error) {
	var k SSHKey
	var userID *string
	err := row.Scan(&k.ID, &k.TenantID, &userID, &k.Name, &k.Fingerprint, &k.PublicKey, &k.CreatedAt)
	k.UserID = orEmpty(userID)
	return k, err
}

// AddSSHKey registers a public key for a tenant. authorizedKey is one line
// of an authorized_keys file, such as the content of id_ed25519.pub; name
// defaults to its comment. The error wraps ErrInvalid when the line is not
// one acceptable public key (garbage, options, several keys, a certificate,
// DSA or RSA under 2048 bits) or another tenant registered the key,
// ErrNotFound when the tenant does not exist, and ErrConflict when the
// tenant registered the key already or has a key with that name. Callers
// must not tell a tenant that another tenant holds a key: that would tell
// who pushes where.
func (s *Store) AddSSHKey(ctx context.Context, tenantID, name, authorizedKey string) (SSHKey, error) {
	return s.AddMemberSSHKey(ctx, tenantID, "", name, authorizedKey)
}

// AddMemberSSHKey is AddSSHKey for a key that belongs to the tenant's
// member userID (empty: to the tenant). The error also wraps ErrNotFound
// when the tenant has no such member.
func (s *Store) AddMemberSSHKey(ctx context.Context, tenantID, userID, name, authorizedKey string) (SSHKey, error) {
	pub, comment, err := parseAuthorizedKey(authorizedKey)
	if err != nil {
		return SSHKey{}, err
	}
	fingerprint := ssh.FingerprintSHA256(pub)
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
	if comment != "" {
		line += " " + comment
	}
	if name = strings.TrimSpace(name); name == "" {
		name = comment
	}
	if name == "" {
		name = fingerprint
	}
	if !isUUID(tenantID) {
		return SSHKey{}, fmt.Errorf("tenant %q: %w", tenantID, ErrNotFound)
	}
	if userID != "" && !isUUID(userID) {
		return SSHKey{}, fmt.Errorf("member %q: %w", userID, ErrNotFound)
	}

	k, err := scanSSHKey(s.pool.QueryRow(ctx,
		"INSERT INTO ssh_keys (tenant_id, user_id, name, fingerprint, public_key) VALUES ($1, $2, $3, $4, $5) RETURNING "+sshKeyColumns,
		tenantID, nullable(userID), name, fingerprint, line))
	if c, ok := constraintViolated(err, codeUniqueViolation); ok {
		if c == "ssh_keys_tenant_id_name_key" {
			return SSHKey{}, fmt.Errorf("ssh key named %q: %w", name, ErrConflict)
		}
		return s.keyTaken(ctx, tenantID, fingerprint)
	}
	if c, ok := constraintViolated(err, codeForeignKeyViolation); ok {
		if c == "ssh_keys_user_in_tenant" {
			return SSHKey{}, fmt.Errorf("member %s of tenant %s: %w", userID, tenantID, ErrNotFound)
		}
		return SSHKey{}, fmt.Errorf("tenant %s: %w", tenantID, ErrNotFound)
	}
	if err != nil {
		return SSHKey{}, fmt.Errorf("adding ssh key %s: %w", fingerprint, err)
	}
	return k, nil
}

// keyTaken is AddSSHKey's error for a key that is registered already:
// ErrConflict naming the key when tenantID registered it, ErrInvalid when
// another tenant did.
func (s *Store) keyTaken(ctx context.Context, tenantID, fingerprint string) (SSHKey, error) {
	var name string
	err := s.pool.QueryRow(ctx, "SELECT name FROM ssh_keys WHERE fingerprint = $1 AND tenant_id = $2", fingerprint, tenantID).Scan(&name)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return SSHKey{}, fmt.Errorf("%w ssh key %s: another tenant registered it", ErrInvalid, fingerprint)
	case err != nil:
		return SSHKey{}, fmt.Errorf("finding ssh key %s: %w", fingerprint, err)
	}
	return SSHKey{}, fmt.Errorf("ssh key %s: registered already, as %q: %w", fingerprint, name, ErrConflict)
}

// parseAuthorizedKey parses one authorized_keys line and refuses what bex
// does not accept as a push key.
func parseAuthorizedKey(line string) (ssh.PublicKey, string, error) {
	line = strings.TrimSpace(line)
	if line == "" {
		return nil, "", fmt.Errorf("%w ssh key: it is empty", ErrInvalid)
	}
	pub, comment, options, rest, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		return nil, "", fmt.Errorf(`%w ssh key: not a public key in authorized_keys form ("ssh-ed25519 AAAA... comment"): %v`, ErrInvalid, err)
	}
	if len(options) > 0 {
		return nil, "", fmt.Errorf("%w ssh key: options (%s) are not allowed; give the key alone", ErrInvalid, strings.Join(options, ","))
	}
	if len(strings.TrimSpace(string(rest))) > 0 {
		return nil, "", fmt.Errorf("%w ssh key: more than one key; add them one at a time", ErrInvalid)
	}
	if _, ok := pub.(*ssh.Certificate); ok {
		return nil, "", fmt.Errorf("%w ssh key: certificates are not accepted; give the plain public key", ErrInvalid)
	}
	switch pub.Type() {
	case "ssh-dss":
		return nil, "", fmt.Errorf("%w ssh key: DSA keys are insecure and no longer accepted; use ssh-keygen -t ed25519", ErrInvalid)
	case ssh.KeyAlgoRSA:
		if ck, ok := pub.(ssh.CryptoPublicKey); ok {
			if rk, ok := ck.CryptoPublicKey().(*rsa.PublicKey); ok && rk.N.BitLen() < minRSABits {
				return nil, "", fmt.Errorf("%w ssh key: an RSA key of %d bits is too weak; use at least %d bits, or ssh-keygen -t ed25519",
					ErrInvalid, rk.N.BitLen(), minRSABits)
			}
		}
	}
	return pub, comment, nil
}

// ListSSHKeys returns the tenant's SSH keys, oldest first.
func (s *Store) ListSSHKeys(ctx context.Context, tenantID string) ([]SSHKey, error) {
	if !isUUID(tenantID) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx,
		"SELECT "+sshKeyColumns+" FROM ssh_keys WHERE tenant_id = $1 ORDER BY created_at, id", tenantID)
	if err != nil {
		return nil, fmt.Errorf("listing ssh keys: %w", err)
	}
	keys, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (SSHKey, error) { return scanSSHKey(row) })
	if err != nil {
		return nil, fmt.Errorf("listing ssh keys: %w", err)
	}
	return keys, nil
}

// FindSSHKeyByFingerprint returns the key with the given SHA256:
// fingerprint (ssh.FingerprintSHA256 of the key a client presents), or an
// error wrapping ErrNotFound.
func (s *Store) FindSSHKeyByFingerprint(ctx context.Context, fingerprint string) (SSHKey, error) {
	k, err := scanSSHKey(s.pool.QueryRow(ctx,
		"SELECT "+sshKeyColumns+" FROM ssh_keys WHERE fingerprint = $1", fingerprint))
	if errors.Is(err, pgx.ErrNoRows) {
		return SSHKey{}, fmt.Errorf("ssh key %s: %w", fingerprint, ErrNotFound)
	}
	if err != nil {
		return SSHKey{}, fmt.Errorf("finding ssh key %s: %w", fingerprint, err)
	}
	return k, nil
}

// DeleteSSHKey removes the tenant's key with the given ID. The error wraps
// ErrNotFound when the tenant has no such key.
func (s *Store) DeleteSSHKey(ctx context.Context, tenantID, id string) error {
	if !isUUID(tenantID) || !isUUID(id) {
		return fmt.Errorf("ssh key %q: %w", id, ErrNotFound)
	}
	tag, err := s.pool.Exec(ctx, "DELETE FROM ssh_keys WHERE id = $1 AND tenant_id = $2", id, tenantID)
	if err != nil {
		return fmt.Errorf("deleting ssh key %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("ssh key %s: %w", id, ErrNotFound)
	}
	return nil
}
