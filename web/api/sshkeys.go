package api

import (
	"errors"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apiclient"
)

// keyRefused is the answer to every key that cannot be registered.
const keyRefused = "this key cannot be registered: give one line of your .pub file, alone and without options " +
	"(ssh-ed25519, ecdsa-sha2-nistp256/384/521, or ssh-rsa of 2048 bits or more; not DSA, not a certificate); " +
	"ssh-keygen -t ed25519 makes a new one"

func sshKeyView(k store.SSHKey, emails map[string]string) apiclient.SSHKey {
	return apiclient.SSHKey{ID: k.ID, Name: k.Name, User: emails[k.UserID], Fingerprint: k.Fingerprint, PublicKey: k.PublicKey, CreatedAt: k.CreatedAt.UTC()}
}

func (s *Server) listSSHKeys(c echo.Context) error {
	keys, err := s.store.ListSSHKeys(c.Request().Context(), principalOf(c).tenant.ID)
	if err != nil {
		return err
	}
	emails, err := s.memberEmails(c)
	if err != nil {
		return err
	}
	views := make([]apiclient.SSHKey, 0, len(keys))
	for _, k := range keys {
		views = append(views, sshKeyView(k, emails))
	}
	return c.JSON(http.StatusOK, views)
}

func (s *Server) addSSHKey(c echo.Context) error {
	var req apiclient.AddSSHKeyRequest
	if err := bind(c, &req, false); err != nil {
		return err
	}
	p := principalOf(c)
	// The key is the caller's member's: a push with it has their role.
	k, err := s.store.AddMemberSSHKey(c.Request().Context(), p.tenant.ID, p.token.UserID, req.Name, req.PublicKey)
	switch {
	case errors.Is(err, store.ErrInvalid):
		// One answer for every refused key, whatever the reason: a key
		// another tenant registered must not be told apart from garbage.
		return invalid("publicKey", "%s", keyRefused)
	case errors.Is(err, store.ErrConflict):
		return &httpError{status: http.StatusConflict, field: "publicKey", message: err.Error()}
	case err != nil:
		return err
	}
	s.audit(c, "sshkey.add", k.Fingerprint, map[string]any{"name": k.Name, "id": k.ID})
	return c.JSON(http.StatusCreated, sshKeyView(k, map[string]string{p.token.UserID: p.email}))
}

func (s *Server) deleteSSHKey(c echo.Context) error {
	p, id := principalOf(c), c.Param("id")
	ctx := c.Request().Context()
	keys, err := s.store.ListSSHKeys(ctx, p.tenant.ID)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(keys, func(k store.SSHKey) bool { return k.ID == id })
	if i < 0 {
		return notFound("ssh key %q not found", id)
	}
	if !ownsOrAdmin(p, keys[i].UserID) {
		return roleRefused(p, store.RoleAdmin, "removing another member's SSH key")
	}
	if err := s.store.DeleteSSHKey(ctx, p.tenant.ID, id); errors.Is(err, store.ErrNotFound) {
		return notFound("ssh key %q not found", id)
	} else if err != nil {
		return err
	}
	s.audit(c, "sshkey.delete", id, nil)
	return c.NoContent(http.StatusNoContent)
}
