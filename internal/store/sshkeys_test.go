package store_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"bex.co/bex/internal/store"
)

// newKey returns a fresh ed25519 public key and its authorized_keys line
// (without comment).
func newKey(t *testing.T) (ssh.PublicKey, ed25519.PrivateKey, string) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return sshPub, priv, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub)))
}

func TestSSHKeys(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	other := newTenant(t, s, "other")

	pub, _, line := newKey(t)
	key, err := s.AddSSHKey(ctx, acme.ID, "", "  "+line+" alice@laptop\n")
	if err != nil {
		t.Fatalf("AddSSHKey: %v", err)
	}
	if key.Fingerprint != ssh.FingerprintSHA256(pub) || !strings.HasPrefix(key.Fingerprint, "SHA256:") {
		t.Errorf("fingerprint %q, want %q", key.Fingerprint, ssh.FingerprintSHA256(pub))
	}
	if key.Name != "alice@laptop" || key.PublicKey != line+" alice@laptop" || key.TenantID != acme.ID {
		t.Errorf("AddSSHKey = %+v", key)
	}

	found, err := s.FindSSHKeyByFingerprint(ctx, ssh.FingerprintSHA256(pub))
	if err != nil || found != key {
		t.Errorf("FindSSHKeyByFingerprint = %+v, %v; want %+v", found, err, key)
	}

	// The same key for another tenant: invalid; again for the tenant:
	// taken, naming the key.
	if _, err := s.AddSSHKey(ctx, other.ID, "mine", line); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("the same key for another tenant: err = %v, want ErrInvalid", err)
	}
	if _, err := s.AddSSHKey(ctx, acme.ID, "again", line); !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "alice@laptop") {
		t.Errorf("the same key again: err = %v, want ErrConflict naming alice@laptop", err)
	}
	// Another key under a name the tenant uses: taken.
	_, _, line2 := newKey(t)
	if _, err := s.AddSSHKey(ctx, acme.ID, "alice@laptop", line2); !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "alice@laptop") {
		t.Errorf("a second key named alice@laptop: err = %v, want ErrConflict naming it", err)
	}
	if _, err := s.AddSSHKey(ctx, "00000000-0000-0000-0000-000000000000", "", line2); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a missing tenant: err = %v, want ErrNotFound", err)
	}
	key2, err := s.AddSSHKey(ctx, acme.ID, "ci", line2)
	if err != nil {
		t.Fatal(err)
	}

	keys, err := s.ListSSHKeys(ctx, acme.ID)
	if err != nil || len(keys) != 2 || keys[0] != key || keys[1] != key2 {
		t.Errorf("ListSSHKeys = %+v, %v; want both keys", keys, err)
	}
	if err := s.DeleteSSHKey(ctx, other.ID, key.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeleteSSHKey by another tenant: err = %v, want ErrNotFound", err)
	}
	if err := s.DeleteSSHKey(ctx, acme.ID, key.ID); err != nil {
		t.Fatalf("DeleteSSHKey: %v", err)
	}
	if _, err := s.FindSSHKeyByFingerprint(ctx, key.Fingerprint); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("finding a deleted key: err = %v, want ErrNotFound", err)
	}
	if err := s.DeleteSSHKey(ctx, acme.ID, key.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleting twice: err = %v, want ErrNotFound", err)
	}
	// Once deleted, the key can be registered by someone else.
	if _, err := s.AddSSHKey(ctx, other.ID, "mine", line); err != nil {
		t.Errorf("re-adding a deleted key elsewhere: %v", err)
	}
}

func TestSSHKeyParsing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")

	pub, priv, line := newKey(t)
	_, _, line2 := newKey(t)

	weak, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	weakPub, err := ssh.NewPublicKey(&weak.PublicKey)
	if err != nil {
		t.Fatal(err)
	}

	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	cert := &ssh.Certificate{Key: pub, CertType: ssh.UserCert, KeyId: "alice", ValidBefore: ssh.CertTimeInfinity}
	if err := cert.SignCert(rand.Reader, signer); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name, line, errPart string
	}{
		{"garbage", "this is not a key", "not a public key in authorized_keys form"},
		{"truncated", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5", "not a public key"},
		{"private key", "-----BEGIN OPENSSH PRIVATE KEY-----", "not a public key"},
		{"empty", "  \n", "empty"},
		{"options", `command="/bin/sh" ` + line, "options (command=\"/bin/sh\") are not allowed"},
		{"two keys", line + "\n" + line2, "more than one key"},
		{"weak rsa", string(ssh.MarshalAuthorizedKey(weakPub)), "RSA key of 1024 bits is too weak"},
		{"certificate", string(ssh.MarshalAuthorizedKey(cert)), "certificates are not accepted"},
	}
	for _, tt := range tests {
		_, err := s.AddSSHKey(ctx, acme.ID, "k", tt.line)
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), tt.errPart) {
			t.Errorf("%s: err = %v, want ErrInvalid saying %q", tt.name, err, tt.errPart)
		}
	}
	if keys, err := s.ListSSHKeys(ctx, acme.ID); err != nil || len(keys) != 0 {
		t.Errorf("refused keys were stored: %+v, %v", keys, err)
	}
}
