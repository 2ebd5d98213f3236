package dashboard

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// sessionCookie is the name of the session cookie.
const sessionCookie = "bex_session"

// session is what the sealed cookie holds.
type session struct {
	// Token is the API token the user signed in with.
	Token string `json:"t"`
	// Tenant is the token's tenant; empty for an operator.
	Tenant   string `json:"n,omitempty"`
	Operator bool   `json:"o,omitempty"`
	// CSRF is the secret every form of the session carries.
	CSRF string `json:"c"`
	// Expires is when the session ends (Unix seconds).
	Expires int64 `json:"e"`
}

// sealer seals and opens session cookies.
type sealer struct {
	aead cipher.AEAD
}

func newSealer(key []byte) (*sealer, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("the cookie key must be 32 bytes, not %d", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

func (s *sealer) seal(sess session) (string, error) {
	plain, err := json.Marshal(sess)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, []byte(sessionCookie))), nil
}

var errNoSession = errors.New("no valid session")

func (s *sealer) open(value string, now time.Time) (session, error) {
	raw, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(raw) < s.aead.NonceSize() {
		return session{}, errNoSession
	}
	plain, err := s.aead.Open(nil, raw[:s.aead.NonceSize()], raw[s.aead.NonceSize():], []byte(sessionCookie))
	if err != nil {
		return session{}, errNoSession
	}
	var sess session
	if err := json.Unmarshal(plain, &sess); err != nil || sess.Token == "" || sess.CSRF == "" || now.Unix() >= sess.Expires {
		return session{}, errNoSession
	}
	return sess, nil
}

// newCSRF returns a fresh CSRF secret.
func newCSRF() string {
	return rand.Text()
}

// csrfOK reports whether a form's CSRF value is the session's.
func csrfOK(sess session, got string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(sess.CSRF)) == 1
}

// cookie returns the session cookie with value, living until expires (a
// zero time removes it). It is always Secure: browsers keep and send Secure
// cookies over HTTPS, and over plain HTTP to a loopback address, which they
// count as secure, so make run's dashboard on 127.0.0.1 works too.
func (d *Dashboard) cookie(value string, expires time.Time) *http.Cookie {
	c := &http.Cookie{
		Name: sessionCookie, Value: value, Path: "/",
		HttpOnly: true, Secure: true, SameSite: http.SameSiteLaxMode,
	}
	if expires.IsZero() {
		c.MaxAge = -1
	} else {
		c.Expires = expires
		c.MaxAge = int(time.Until(expires).Seconds())
	}
	return c
}
