package store

import (
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// UnavailableMessage is what callers tell a client when the database is
// unavailable: nothing of the request was done, and it may be tried again.
const UnavailableMessage = "the platform's database is unavailable: nothing was changed; try again shortly"

// Unavailable reports whether err came from the database being out of
// reach (not listening, shutting down, restarting, or the connection lost
// midway), as opposed to an answer of the database about the request. Such
// an error is temporary: the pool connects again once the server is back.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08 is connection exceptions; 57P01..03 are the server
		// shutting down or not accepting connections yet.
		return strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"
	}
	var netErr net.Error
	return errors.As(err, &netErr) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
