package gitserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/format/pktline"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/sideband"

	"bex.co/bex/internal/bytesize"
	"bex.co/bex/internal/steptime"
)

const agent = "bex-gitserver"

// Reasons sent in the report-status "ng <ref> <reason>" lines; git prints
// them as "! [remote rejected] main -> main (<reason>)".
const (
	reasonBuildFailed    = "build failed"
	reasonNonFastForward = "non-fast-forward"
	reasonStale          = "stale info"
	reasonDeleteDeploy   = "deleting the deploy branch is not allowed"
	reasonRefName        = "only branches and tags can be pushed"
	reasonBadRefName     = "invalid reference name"
	reasonMissingObjects = "missing necessary objects"
	reasonUnpacker       = "unpacker error"
	reasonInternal       = "internal error"
	reasonRefused        = "push rejected"
	// reasonShallow is git's own wording for a push from a shallow clone
	// that would leave the repository without part of its history.
	reasonShallow = "shallow update not allowed"
)

// The receiver's steps of a push, in the push's steptime.Timeline ahead of
// the Deployer's: they cover the receive-pack request (HTTP) or command
// (SSH) from its start to the Deployer's call, but for a few
// microseconds between them.
const (
	// stepAuth is the credential's check, the app's lookup and the
	// repository's opening (over SSH the key was checked at the handshake).
	stepAuth = "auth"
	// stepReceive is the reference updates and the pack read from the
	// client into a spool file: the transfer, with the client's packing as
	// it sends; over SSH also the reference advertisement.
	stepReceive = "receive"
	// stepStore is the repository quota's check and the pack's index, sync
	// and move into the repository.
	stepStore = "store"
	// stepLockWait is the wait for another push to the same repository,
	// there only when there was one.
	stepLockWait = "lock wait"
	// stepRefs is the repository's storage opened again under its lock and
	// the reference updates checked against it, up to the Deployer's call.
	stepRefs = "refs"
)

// timePush returns ctx with a new timeline for a push's steps: the
// receiver's first, then the Deployer's, which it is called with.
func timePush(ctx context.Context) context.Context {
	ctx, _ = steptime.New(ctx)
	return ctx
}

// receivePackCapabilities are what the receiver advertises. no-thin makes the
// client send self-contained packs, which are stored as they come.
func receivePackCapabilities() *capability.List {
	c := capability.NewList()
	for _, cp := range []capability.Capability{
		capability.ReportStatus, capability.DeleteRefs, capability.OFSDelta,
		capability.Sideband64k, capability.Sideband, capability.Capability("no-thin"),
	} {
		_ = c.Set(cp)
	}
	_ = c.Set(capability.Agent, agent)
	return c
}

// advertiseReceivePack writes the reference advertisement that starts a push.
func (s *Server) advertiseReceivePack(w io.Writer, r *repo, prefix [][]byte) error {
	ar := packp.NewAdvRefs()
	ar.Prefix = prefix
	ar.Capabilities = receivePackCapabilities()
	if err := addReferences(r, ar); err != nil {
		return err
	}
	if err := ar.Encode(w); err != nil {
		return fmt.Errorf("writing advertisement: %w", err)
	}
	return nil
}

// addReferences lists the repository's branches and tags in ar.
func addReferences(r *repo, ar *packp.AdvRefs) error {
	iter, err := r.sto.IterReferences()
	if err != nil {
		return fmt.Errorf("listing references: %w", err)
	}
	err = iter.ForEach(func(ref *plumbing.Reference) error {
		if ref.Type() == plumbing.HashReference && ref.Name() != plumbing.HEAD {
			ar.References[ref.Name().String()] = ref.Hash()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("listing references: %w", err)
	}
	return nil
}

// flushPkt is a pkt-line flush: a request made of it alone asks for
// nothing.
const flushPkt = "0000"

// readPktHeader reads the four hex digits that start a pkt-line from r,
// and no more, so that nothing past them (a pack) is read ahead. It
// returns them as read and the length of the line's payload, -1 for a
// flush-pkt; io.EOF when r ends before its first byte.
func readPktHeader(r io.Reader) ([4]byte, int, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return hdr, 0, err
	}
	if string(hdr[:]) == flushPkt {
		return hdr, -1, nil
	}
	n, err := strconv.ParseUint(string(hdr[:]), 16, 16)
	if err != nil || n < 4 || n > pktline.MaxPayloadSize+4 {
		return hdr, 0, fmt.Errorf("invalid pkt-line length %q", hdr[:])
	}
	return hdr, int(n) - 4, nil
}

// readShallow reads the "shallow <oid>" lines that start the update
// request of a shallow clone: git's send-pack sends the boundary commits
// of its history (commits whose parents it does not have) ahead of the
// commands, each line with a newline, which go-git's decoder refuses.
// It returns them, and the request from its first command on; a nil
// reader when the request has no command: it ended before any line, or
// flushed after the shallow lines, a push with nothing to update. r's own
// limit bounds their count.
func readShallow(r io.Reader) ([]plumbing.Hash, io.Reader, error) {
	var shallow []plumbing.Hash
	for {
		hdr, n, err := readPktHeader(r)
		switch {
		case errors.Is(err, io.EOF) && len(shallow) == 0:
			return nil, nil, nil // nothing sent: the client only wanted the advertisement
		case errors.Is(err, io.EOF):
			return nil, nil, io.ErrUnexpectedEOF
		case err != nil:
			return nil, nil, err
		case n < 0:
			return shallow, nil, nil
		}
		line := make([]byte, 4+n)
		copy(line, hdr[:])
		if _, err := io.ReadFull(r, line[4:]); errors.Is(err, io.EOF) {
			return nil, nil, io.ErrUnexpectedEOF
		} else if err != nil {
			return nil, nil, err
		}
		payload, ok := bytes.CutPrefix(line[4:], []byte("shallow "))
		if !ok {
			return shallow, io.MultiReader(bytes.NewReader(line), r), nil
		}
		oid := string(bytes.TrimSuffix(payload, []byte("\n")))
		if !plumbing.IsHash(oid) {
			return nil, nil, fmt.Errorf("invalid shallow line %q: want \"shallow\" and a commit's 40 hex digits", line[4:])
		}
		shallow = append(shallow, plumbing.NewHash(oid))
	}
}

// shallowCut returns the first of a shallow clone's boundary commits that
// the repository holds without all of its parents: the push brought it,
// and applying the push would leave the app's history cut below it. A
// boundary commit the repository lacks is not in what was pushed; one it
// holds with its parents is history it had already (a CI job's depth-1
// clone of history pushed before).
func shallowCut(r *repo, shallow []plumbing.Hash) (plumbing.Hash, bool) {
	for _, h := range shallow {
		c, err := object.GetCommit(r.sto, h)
		if err != nil {
			continue
		}
		for _, p := range c.ParentHashes {
			if _, err := r.sto.EncodedObject(plumbing.CommitObject, p); err != nil {
				return h, true
			}
		}
	}
	return plumbing.ZeroHash, false
}

// receivePack serves the second half of a push: it reads the commands and the
// pack from in, stores the objects, takes the repository lock, applies each
// command (running the deploy for the deploy branch) and writes the outcome to
// out, calling flush after each packet so progress reaches the client at once.
func (s *Server) receivePack(ctx context.Context, r *repo, in io.Reader, out io.Writer, flush func()) error {
	stopReceive := steptime.Start(ctx, stepReceive)
	req := packp.NewReferenceUpdateRequest()
	// The commands are read through cmds, and no further than the flush
	// that ends them, so the pack that follows is read from in itself.
	cmds := newLimitedReader(in, maxCommandBytes, "the push's reference updates", "")
	// A push with nothing to update (git's "Everything up-to-date" over
	// SSH, whose connection is open by then) sends a flush alone, or its
	// shallow lines and a flush, which go-git's decoder takes for a
	// malformed request: rest is nil then.
	shallow, rest, err := readShallow(cmds)
	if err != nil {
		if tl := cmds.tooLarge(); tl != nil {
			return tl
		}
		return fmt.Errorf("reading update request: %w", err)
	}
	if rest == nil {
		return nil
	}
	// rest starts with a whole pkt-line, so the decoder's first scan
	// cannot come back empty (its packp.ErrEmpty).
	if err := req.Decode(rest); err != nil {
		if tl := cmds.tooLarge(); tl != nil {
			return tl
		}
		return fmt.Errorf("decoding update request: %w", err)
	}
	stopReceive()
	caps := req.Capabilities
	band := sideband.Sideband64k
	if !caps.Supports(capability.Sideband64k) {
		band = sideband.Sideband
	}
	sw := newSidebandWriter(out, flush, band,
		caps.Supports(capability.Sideband64k) || caps.Supports(capability.Sideband))
	log := s.log.WithValues("tenant", r.tenant, "app", r.app, "actor", r.actor)

	rs := packp.NewReportStatus()
	rs.UnpackStatus = "ok"
	if err := s.storePack(ctx, r, req, in, sw); err != nil {
		log.Info("Push refused", "reason", err.Error())
		var tooLarge *bodyTooLargeError
		if errors.As(err, &tooLarge) {
			return tooLarge // nothing answered yet: over HTTP, a 413
		}
		rs.UnpackStatus = err.Error()
		for _, cmd := range req.Commands {
			rs.CommandStatuses = append(rs.CommandStatuses, &packp.CommandStatus{ReferenceName: cmd.Name, Status: reasonUnpacker})
		}
		return finishReport(sw, caps, rs)
	}

	kctx, stopKeepAlive := context.WithCancel(ctx)
	defer stopKeepAlive()
	go sw.keepAlive(kctx, s.keepAlive)

	unlock, ok := s.tryLock(r.dir)
	if !ok {
		sw.Printf("Another push to %s is in progress; waiting for it to finish...", r.app)
		stopWait := steptime.Start(ctx, stepLockWait)
		var err error
		if unlock, err = s.lock(ctx, r.dir); err != nil {
			return err
		}
		stopWait()
	}
	defer unlock()
	// Re-open the storage under the lock: objects a concurrent push stored
	// are visible only to a fresh one.
	stopRefs := steptime.Start(ctx, stepRefs)
	r.reopen()
	cut, isCut := shallowCut(r, shallow)
	stopRefs()
	if isCut {
		log.Info("Push refused", "reason", reasonShallow, "boundary", cut.String())
		sw.Printf("This push comes from a shallow clone and the app's repository does not have the history below %s: "+
			"run `git fetch --unshallow` and push again.", cut.String()[:7])
	}
	for _, cmd := range req.Commands {
		status := reasonShallow
		if !isCut || cmd.New == plumbing.ZeroHash {
			status = s.apply(ctx, r, cmd, sw)
		}
		rs.CommandStatuses = append(rs.CommandStatuses, &packp.CommandStatus{ReferenceName: cmd.Name, Status: status})
		log.Info("Reference update", "ref", cmd.Name.String(), "new", cmd.New.String(), "status", status)
	}
	return finishReport(sw, caps, rs)
}

func finishReport(sw *sidebandWriter, caps *capability.List, rs *packp.ReportStatus) error {
	if !caps.Supports(capability.ReportStatus) {
		return sw.finish(func(io.Writer) error { return nil })
	}
	return sw.finish(rs.Encode)
}

// errPackTooLarge is the unpack status of a pack over the size limit.
type errPackTooLarge struct{ limit int64 }

func (e errPackTooLarge) Error() string {
	return fmt.Sprintf("pack exceeds the maximum push size of %s", bytesize.Format(e.limit))
}

// storePack receives the pack into a temporary file, refusing it when it is
// larger than the limit, and only then adds it to the repository, so that a
// refused or broken push, or one the disk has no room for, stores nothing.
func (s *Server) storePack(ctx context.Context, r *repo, req *packp.ReferenceUpdateRequest, in io.Reader, sw *sidebandWriter) error {
	needed := false
	for _, cmd := range req.Commands {
		needed = needed || cmd.New != plumbing.ZeroHash
	}
	if !needed {
		return nil // deletions only: git sends no pack
	}
	stopReceive := steptime.Start(ctx, stepReceive)
	f, err := os.CreateTemp(r.dir, "incoming-*.pack")
	if err != nil {
		return s.notStored(r, in, sw, fmt.Errorf("creating temporary pack: %w", err))
	}
	defer func() {
		_ = f.Close()
		_ = os.Remove(f.Name()) // gone already once installed
	}()
	n, err := io.Copy(f, io.LimitReader(in, s.maxPush+1))
	if err != nil {
		return s.notStored(r, in, sw, fmt.Errorf("receiving pack: %w", err))
	}
	if n > s.maxPush {
		// Read the rest so that the client, still sending, gets the answer;
		// a decompressed body ends at its own limit, answered 413.
		var tooLarge *bodyTooLargeError
		if _, err := io.Copy(io.Discard, in); errors.As(err, &tooLarge) {
			return tooLarge
		}
		sw.Printf("Push rejected: the pushed pack is larger than the %s limit.", bytesize.Format(s.maxPush))
		return errPackTooLarge{limit: s.maxPush}
	}
	stopReceive()
	if n == 0 {
		return nil
	}
	defer steptime.Start(ctx, stepStore)()
	if err := s.checkRepoQuota(ctx, r, sw); err != nil {
		return err
	}
	if err := installPack(r.dir, f); err != nil {
		return s.notStored(r, in, sw, err)
	}
	return nil
}

// errDiskFull is the unpack status of a pack the platform's disk had no
// room for.
type errDiskFull struct{}

func (errDiskFull) Error() string { return "the platform's disk is full; the push was not stored" }

// notStored turns a failure to store a push into its answer: a disk out
// of space (or quota) is said to the pusher in those words, with its
// details in the receiver's log for the operator; other errors are
// returned as they are. The rest of the pack is read, so that the client,
// still sending, gets the answer.
func (s *Server) notStored(r *repo, in io.Reader, sw *sidebandWriter, err error) error {
	var tooLarge *bodyTooLargeError
	if errors.As(err, &tooLarge) || !DiskFull(err) {
		return err
	}
	if _, derr := io.Copy(io.Discard, in); errors.As(derr, &tooLarge) {
		return tooLarge
	}
	s.log.Error(err, "Disk full: push not stored", "tenant", r.tenant, "app", r.app, "repository", r.dir)
	sw.Printf("Push rejected: the platform's disk is full; the push was not stored and %s was not updated: the previous release keeps serving. "+
		"Push again once the platform's operator has freed space.", r.branch)
	return errDiskFull{}
}

// DiskFull reports whether err is a write that found no room: no space or
// no inode left (both ENOSPC), or a disk quota reached. The pipeline asks
// it of a release it could not unpack.
func DiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// installPack parses the pack in f (a file in the repository's directory)
// as the repository's storage would, writes its index beside it and moves
// both into objects/pack: the pack first, then its index, which is what
// makes readers see it. Until then nothing is in objects/pack, and on any
// failure what it wrote is removed: a repository never holds part of a
// push. The files are synced before they are moved, so that a crash
// right after a push loses nothing it reported stored.
func installPack(repoDir string, f *os.File) error {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("rewinding pack: %w", err)
	}
	index := new(idxfile.Writer)
	p, err := packfile.NewParser(packfile.NewScanner(f), index)
	if err != nil {
		return fmt.Errorf("reading pack: %w", err)
	}
	sum, err := p.Parse()
	if err != nil {
		return fmt.Errorf("reading pack: %w", err)
	}
	idx, err := index.Index()
	if err != nil {
		return fmt.Errorf("indexing pack: %w", err)
	}
	packDir := filepath.Join(repoDir, "objects", "pack")
	if err := os.MkdirAll(packDir, 0o755); err != nil {
		return fmt.Errorf("storing pack: %w", err)
	}
	base := filepath.Join(packDir, "pack-"+sum.String())
	if _, err := os.Stat(base + ".idx"); err == nil {
		return nil // the same pack is stored already
	}
	tmp, err := os.CreateTemp(packDir, "incoming-*.idx")
	if err != nil {
		return fmt.Errorf("storing pack index: %w", err)
	}
	defer func() {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name()) // gone already once installed
	}()
	if _, err := idxfile.NewEncoder(tmp).Encode(idx); err != nil {
		return fmt.Errorf("storing pack index: %w", err)
	}
	for _, file := range []*os.File{f, tmp} {
		if err := file.Sync(); err != nil {
			return fmt.Errorf("storing pack: %w", err)
		}
		if err := file.Chmod(0o444); err != nil {
			return fmt.Errorf("storing pack: %w", err)
		}
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("storing pack index: %w", err)
	}
	if err := os.Rename(f.Name(), base+".pack"); err != nil {
		return fmt.Errorf("storing pack: %w", err)
	}
	if err := os.Rename(tmp.Name(), base+".idx"); err != nil {
		_ = os.Remove(base + ".pack")
		return fmt.Errorf("storing pack index: %w", err)
	}
	return nil
}

// errRepoQuota is the unpack status of a pack that would take the tenant's
// repositories past their quota.
type errRepoQuota struct{ limit int64 }

func (e errRepoQuota) Error() string {
	return fmt.Sprintf("repoBytes quota of %s exceeded", bytesize.Format(e.limit))
}

// checkRepoQuota refuses a received pack when the tenant's repositories,
// with the pack (spooled in the repository's directory), take more than
// the tenant's quota.
func (s *Server) checkRepoQuota(ctx context.Context, r *repo, sw *sidebandWriter) error {
	if s.quota == nil {
		return nil
	}
	limit, err := s.quota.RepoBytes(ctx, r.tenant)
	if err != nil {
		return fmt.Errorf("reading the repository quota of %s: %w", r.tenant, err)
	}
	used, err := dirSize(filepath.Join(s.root, r.tenant))
	if err != nil {
		return fmt.Errorf("measuring the repositories of %s: %w", r.tenant, err)
	}
	if used > limit {
		sw.Printf("Push rejected: the tenant's repoBytes quota (%s) is reached: its repositories would take %s with this push; "+
			"delete apps you no longer need, or ask the operator to raise the quota.", bytesize.Format(limit), bytesize.Format(used))
		return errRepoQuota{limit: limit}
	}
	return nil
}

// dirSize returns the bytes of the regular files under dir; 0 when dir
// does not exist.
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // gone meanwhile: a repository deleted, a spool removed
		}
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		n += info.Size()
		return nil
	})
	return n, err
}

// apply evaluates one command against the repository's current state (the
// lock is held) and returns its report-status: "ok" or the reason of an ng.
func (s *Server) apply(ctx context.Context, r *repo, cmd *packp.Command, sw *sidebandWriter) string {
	// The checks, and the update of a reference before the deploy
	// branch's, are the receiver's time; the deploy is the Deployer's.
	stopRefs := sync.OnceFunc(steptime.Start(ctx, stepRefs))
	defer stopRefs()
	name := cmd.Name
	// git's own rules for names (no "..", no "." component, ...): the
	// storage refuses some of these, and would accept others git cannot use.
	if err := name.Validate(); err != nil {
		sw.Printf("Refusing %q: %s.", name, reasonBadRefName)
		return reasonBadRefName
	}
	if !name.IsBranch() && !name.IsTag() {
		sw.Printf("Refusing %s: %s.", name, reasonRefName)
		return reasonRefName
	}
	var cur *plumbing.Reference
	curHash := plumbing.ZeroHash
	switch ref, err := r.sto.Reference(name); {
	case err == nil:
		cur, curHash = ref, ref.Hash()
	case !errors.Is(err, plumbing.ErrReferenceNotFound):
		s.log.Error(err, "Reading reference failed", "ref", name.String())
		return reasonInternal
	}
	if cmd.New != plumbing.ZeroHash {
		if _, err := r.sto.EncodedObject(plumbing.AnyObject, cmd.New); err != nil {
			return reasonMissingObjects
		}
	}
	// The client computed its command against the state it was shown. When a
	// concurrent push moved the ref since, the command is judged against the
	// real state: only a fast-forward from it is accepted.
	if cmd.Old != curHash && curHash != plumbing.ZeroHash {
		if cmd.New == plumbing.ZeroHash {
			return reasonStale
		}
		if ff, _ := isAncestor(r, curHash, cmd.New); !ff {
			sw.Printf("%s moved to %s while this push waited, and %s does not contain it: fetch, merge and push again.",
				name.Short(), curHash.String()[:7], cmd.New.String()[:7])
			return reasonNonFastForward
		}
	}
	deploy := name == plumbing.NewBranchReferenceName(r.branch)

	if cmd.New == plumbing.ZeroHash {
		if deploy {
			sw.Printf("Refusing to delete %s: it is the app's deploy branch.", r.branch)
			return reasonDeleteDeploy
		}
		if cur == nil {
			return "ok"
		}
		if err := r.sto.RemoveReference(name); err != nil {
			s.log.Error(err, "Deleting reference failed", "ref", name.String())
			return reasonInternal
		}
		return "ok"
	}

	var res DeployResult
	switch {
	case deploy && cmd.New != curHash:
		push := Push{
			Tenant: r.tenant, App: r.app, Branch: r.branch, Actor: r.actor,
			Old: curHash.String(), New: cmd.New.String(), RepoDir: r.dir,
		}
		var err error
		var refused *RefusedError
		stopRefs()
		if res, err = s.deploy(ctx, push, sw); errors.As(err, &refused) {
			s.log.Info("Push refused", "tenant", r.tenant, "app", r.app, "commit", push.New, "reason", err.Error())
			sw.Printf("Push rejected: %v", err)
			sw.Printf("%s was not updated; the previous release keeps serving.", r.branch)
			return reasonRefused
		} else if err != nil {
			s.log.Info("Deploy failed", "tenant", r.tenant, "app", r.app, "commit", push.New, "error", err.Error())
			sw.Printf("Build failed: %v", err)
			sw.Printf("%s was not updated; the previous release keeps serving.", r.branch)
			return reasonBuildFailed
		}
	case name.IsBranch():
		sw.Printf("Branch %s is not the deploy branch (%s); nothing to build.", name.Short(), r.branch)
	}
	if err := r.sto.CheckAndSetReference(plumbing.NewHashReference(name, cmd.New), cur); err != nil {
		s.log.Error(err, "Updating reference failed", "ref", name.String())
		return reasonInternal
	}
	if deploy && cmd.New != curHash {
		sw.Printf("Released v%d: %s", res.Release, res.URL)
	}
	return "ok"
}

// deploy calls the Deployer, turning a panic into an error so that one bad
// build cannot take the receiver down.
func (s *Server) deploy(ctx context.Context, push Push, log io.Writer) (res DeployResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error(fmt.Errorf("panic: %v", p), "Deployer panicked", "tenant", push.Tenant, "app", push.App)
			err = errors.New("internal error in the build service")
		}
	}()
	return s.deployer.Deploy(ctx, push, log)
}

// isAncestor reports whether commit a is an ancestor of (or equal to) b.
func isAncestor(r *repo, a, b plumbing.Hash) (bool, error) {
	ca, err := object.GetCommit(r.sto, a)
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", a, err)
	}
	cb, err := object.GetCommit(r.sto, b)
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", b, err)
	}
	return ca.IsAncestor(cb)
}
