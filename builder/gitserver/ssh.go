package gitserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"bex.co/bex/internal/steptime"
)

// Permission extensions carrying the principal from authentication to the
// session.
const (
	extTenant     = "bex-tenant"
	extActor      = "bex-actor"
	extPushDenied = "bex-push-denied"
)

// ServeSSH accepts SSH connections on l until ctx is done, then closes l and
// the open connections and returns nil once their sessions have ended. Only
// public-key authentication is offered; a session may exec
// `git-receive-pack '/<tenant>/<app>.git'` or `git-upload-pack '…'`, as
// `git push ssh://git@host:port/<tenant>/<app>.git` does. The SSH user name is
// ignored.
func (s *Server) ServeSSH(ctx context.Context, l net.Listener, hostKey ssh.Signer) error {
	if hostKey == nil {
		return errors.New("gitserver: ServeSSH needs a host key")
	}
	cfg := &ssh.ServerConfig{
		ServerVersion: "SSH-2.0-bex",
		PublicKeyCallback: func(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			p, err := s.auth.AuthenticatePublicKey(ctx, key)
			if err == nil && p.Tenant == "" {
				err = errors.New("authenticator returned a principal without a tenant")
			}
			switch {
			case errors.Is(err, ErrUnavailable):
				// A banner is the one way to tell the client why before
				// any channel is open: without it, git says the key was
				// refused, and the tenant goes looking for a key problem.
				s.log.Error(err, "Authenticating SSH key failed", "remote", meta.RemoteAddr().String())
				return nil, &ssh.BannerError{Err: err, Message: "bex: " + errUnavailable.msg + "\n"}
			case err != nil:
				if !errors.Is(err, ErrUnauthenticated) {
					s.log.Error(err, "Authenticating SSH key failed", "remote", meta.RemoteAddr().String())
				}
				return nil, errors.New("public key not registered with bex")
			}
			return &ssh.Permissions{Extensions: map[string]string{extTenant: p.Tenant, extActor: p.Actor, extPushDenied: p.PushDenied}}, nil
		},
	}
	cfg.AddHostKey(hostKey)

	stop := context.AfterFunc(ctx, func() { _ = l.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accepting ssh connection: %w", err)
		}
		wg.Go(func() { s.serveSSHConn(ctx, conn, cfg) })
	}
}

func (s *Server) serveSSHConn(ctx context.Context, conn net.Conn, cfg *ssh.ServerConfig) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // the connection is gone: cancel what its sessions run
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()

	conn = newIdleConn(conn, s.ssh.Idle)
	_ = conn.SetDeadline(time.Now().Add(s.ssh.Handshake))
	sconn, chans, reqs, err := ssh.NewServerConn(conn, cfg)
	if err != nil {
		s.log.V(1).Info("SSH handshake failed", "remote", conn.RemoteAddr().String(), "error", err.Error())
		_ = conn.Close()
		return
	}
	_ = conn.SetDeadline(time.Time{})
	defer func() { _ = sconn.Close() }()
	go ssh.DiscardRequests(reqs)

	ext := sconn.Permissions.Extensions
	p := Principal{Tenant: ext[extTenant], Actor: ext[extActor], PushDenied: ext[extPushDenied]}
	var wg sync.WaitGroup
	defer wg.Wait()
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "only session channels are supported")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		wg.Go(func() { s.serveSSHSession(ctx, p, ch, creqs) })
	}
	cancel()
}

// serveSSHSession runs the one command a git session execs.
func (s *Server) serveSSHSession(ctx context.Context, p Principal, ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer func() { _ = ch.Close() }()
	for req := range reqs {
		switch req.Type {
		case "exec":
			var payload struct{ Command string }
			if err := ssh.Unmarshal(req.Payload, &payload); err != nil {
				_ = req.Reply(false, nil)
				continue
			}
			_ = req.Reply(true, nil)
			go discardRequests(reqs)
			exit(ch, s.runSSHCommand(ctx, p, ch, payload.Command))
			return
		case "shell":
			_ = req.Reply(true, nil)
			go discardRequests(reqs)
			_, _ = fmt.Fprintf(ch.Stderr(), "Hi %s! You are authenticated to bex for tenant %s, but there is no shell access: use git push.\n", p.Actor, p.Tenant)
			exit(ch, 1)
			return
		default: // env (GIT_PROTOCOL), pty-req...: not used
			if req.WantReply {
				_ = req.Reply(false, nil)
			}
		}
	}
}

func discardRequests(reqs <-chan *ssh.Request) {
	for req := range reqs {
		if req.WantReply {
			_ = req.Reply(false, nil)
		}
	}
}

func exit(ch ssh.Channel, status uint32) {
	_ = ch.CloseWrite()
	_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{status}))
}

// runSSHCommand runs git-receive-pack or git-upload-pack and returns the exit
// status.
func (s *Server) runSSHCommand(ctx context.Context, p Principal, ch ssh.Channel, command string) uint32 {
	service, tenant, app, ok := parseSSHCommand(command)
	if !ok {
		_, _ = fmt.Fprintf(ch.Stderr(), "bex: unsupported command %q: only git push and git fetch are served\n", command)
		return 1
	}
	if service == serviceReceivePack {
		ctx = timePush(ctx)
	}
	stopAuth := steptime.Start(ctx, stepAuth)
	r, err := s.authorize(ctx, p, tenant, app)
	if err == nil && service == serviceReceivePack {
		err = pushDenied(p)
	}
	if err != nil {
		_ = writeErr(ch, err.Error())
		return 1
	}
	stopAuth()
	if service == serviceReceivePack {
		stopReceive := steptime.Start(ctx, stepReceive)
		err = s.advertiseReceivePack(ch, r, nil)
		stopReceive()
		if err == nil {
			err = s.receivePack(ctx, r, ch, ch, func() {})
		}
	} else {
		if err = s.advertiseUploadPack(ch, r, nil); err == nil {
			err = s.uploadPack(ctx, r, ch, ch, false)
		}
	}
	if err != nil {
		s.log.Error(err, "Serving git request failed", "service", service, "tenant", tenant, "app", app)
		return 1
	}
	return 0
}

// parseSSHCommand splits `git-receive-pack '/tenant/app.git'` (also
// `git receive-pack`, with or without quotes, leading slash or .git).
func parseSSHCommand(command string) (service, tenant, app string, ok bool) {
	command = strings.TrimSpace(command)
	for _, svc := range []string{serviceReceivePack, serviceUploadPack} {
		for _, prefix := range []string{svc + " ", "git " + strings.TrimPrefix(svc, "git-") + " "} {
			if rest, found := strings.CutPrefix(command, prefix); found {
				service, command = svc, strings.TrimSpace(rest)
			}
		}
	}
	if service == "" {
		return "", "", "", false
	}
	path := strings.Trim(command, `'"`)
	path = strings.TrimSuffix(strings.Trim(path, "/"), ".git")
	tenant, app, ok = strings.Cut(path, "/")
	if !ok || strings.Contains(app, "/") {
		return "", "", "", false
	}
	return service, tenant, app, true
}
