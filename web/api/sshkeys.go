package api

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apiclient"
)

// keyRefused is the answer to every key that cannot be registered.
const keyRefused = "this key cannot be registered: give one line of your .pub file, alone and without options " +
	"(ssh-ed25519, ecdsa-sha2-nistp256/384/521, or ssh-rsa of 2048 bits or more; not DSA, not a certificate); " +
	"ssh-keygen -t ed25519 makes a new one"

func sshKeyView(k store.SSHKey) apiclient.SSHKey {
	return apiclient.SSHKey{ID: k.ID, Name: k.Name, Fingerprint: k.Fingerprint, PublicKey: k.PublicKey, CreatedAt: k.CreatedAt.UTC()}
}

func (s *Server) listSSHKeys(c echo.Context) error {
	keys, err := s.store.ListSSHKeys(c.Request().Context(), principalOf(c).tenant.ID)
	if err != nil {
		return err
	}
	views := make([]apiclient.SSHKey, 0, len(keys))
	for _, k := range keys {
		views = append(views, sshKeyView(k))
	}
	return c.JSON(http.StatusOK, views)
}

func (s *Server) addSSHKey(c echo.Context) error {
	var req apiclient.AddSSHKeyRequest
	if err := bind(c, &req, false); err != nil {
		return err
	}
	k, err := s.store.AddSSHKey(c.Request().Context(), principalOf(c).tenant.ID, req.Name, req.PublicKey)
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
	return c.JSON(http.StatusCreated, sshKeyView(k))
}

func (s *Server) deleteSSHKey(c echo.Context) error {
	id := c.Param("id")
	if err := s.store.DeleteSSHKey(c.Request().Context(), principalOf(c).tenant.ID, id); errors.Is(err, store.ErrNotFound) {
		return notFound("ssh key %q not found", id)
	} else if err != nil {
		return err
	}
	s.audit(c, "sshkey.delete", id, nil)
	return c.NoContent(http.StatusNoContent)
}
