package gitserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/format/pktline"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/revlist"
	"github.com/go-git/go-git/v5/utils/ioutil"
)

// uploadPackCapabilities are what the receiver advertises to fetches: the
// plain v0 protocol without multi-ack, side-band, shallow or filters, which
// git clients fall back to.
func uploadPackCapabilities(r *repo) *capability.List {
	c := capability.NewList()
	_ = c.Set(capability.OFSDelta)
	_ = c.Set(capability.Agent, agent)
	if head, err := r.sto.Reference(plumbing.HEAD); err == nil && head.Type() == plumbing.SymbolicReference {
		if _, err := r.sto.Reference(head.Target()); err == nil {
			_ = c.Set(capability.SymRef, "HEAD:"+head.Target().String())
		}
	}
	return c
}

// advertiseUploadPack writes the reference advertisement that starts a fetch.
func (s *Server) advertiseUploadPack(w io.Writer, r *repo, prefix [][]byte) error {
	ar := packp.NewAdvRefs()
	ar.Prefix = prefix
	ar.Capabilities = uploadPackCapabilities(r)
	if err := addReferences(r, ar); err != nil {
		return err
	}
	if head, err := r.sto.Reference(plumbing.HEAD); err == nil {
		if target, err := r.sto.Reference(head.Target()); err == nil && target.Type() == plumbing.HashReference {
			h := target.Hash()
			ar.Head = &h
		}
	}
	if err := ar.Encode(w); err != nil {
		return fmt.Errorf("writing advertisement: %w", err)
	}
	return nil
}

// uploadPack serves a fetch after the advertisement: wants, the have
// negotiation of the non-multi-ack protocol, and the pack. stateless is the
// smart-HTTP mode, where every round of haves is its own request; there the
// receiver never acknowledges a have, so the client ends with "done" and gets
// a complete pack of what it wants (correct, if not minimal).
func (s *Server) uploadPack(ctx context.Context, r *repo, in io.Reader, out io.Writer, stateless bool) error {
	first, n, err := readPktHeader(in)
	if errors.Is(err, io.EOF) || n < 0 {
		return nil // the client only wanted the advertisement
	}
	if err != nil {
		return fmt.Errorf("reading upload request: %w", err)
	}
	in = io.MultiReader(bytes.NewReader(first[:]), in)
	req := packp.NewUploadRequest()
	if err := req.Decode(in); err != nil {
		return fmt.Errorf("decoding upload request: %w", err)
	}
	for _, w := range req.Wants {
		if _, err := r.sto.EncodedObject(plumbing.AnyObject, w); err != nil {
			return writeErr(out, fmt.Sprintf("upload-pack: not our ref %s", w))
		}
	}
	if len(req.Shallows) > 0 || !req.Depth.IsZero() {
		return writeErr(out, "shallow fetches are not supported")
	}

	enc := pktline.NewEncoder(out)
	sc := pktline.NewScanner(in)
	var common []plumbing.Hash
	for {
		if !sc.Scan() {
			if err := sc.Err(); err != nil {
				return fmt.Errorf("reading haves: %w", err)
			}
			return errors.New("reading haves: unexpected end of request")
		}
		line := bytes.TrimSuffix(sc.Bytes(), []byte("\n"))
		switch {
		case len(line) == 0: // flush: end of a round of haves
			if len(common) == 0 {
				if err := enc.EncodeString("NAK\n"); err != nil {
					return fmt.Errorf("writing NAK: %w", err)
				}
			}
			if stateless {
				return nil
			}
			continue
		case bytes.HasPrefix(line, []byte("have ")):
			h := plumbing.NewHash(string(line[len("have "):]))
			if stateless {
				continue
			}
			if _, err := r.sto.EncodedObject(plumbing.AnyObject, h); err == nil {
				common = append(common, h)
				if len(common) == 1 {
					if err := enc.Encodef("ACK %s\n", h); err != nil {
						return fmt.Errorf("writing ACK: %w", err)
					}
				}
			}
			continue
		case string(line) == "done":
		default:
			return writeErr(out, fmt.Sprintf("upload-pack: unexpected line %q", line))
		}
		break
	}
	if len(common) == 0 {
		if err := enc.EncodeString("NAK\n"); err != nil {
			return fmt.Errorf("writing NAK: %w", err)
		}
	}
	objs, err := revlist.Objects(r.sto, req.Wants, common)
	if err != nil {
		return fmt.Errorf("listing objects: %w", err)
	}
	w := ioutil.NewContextWriter(ctx, out)
	if _, err := packfile.NewEncoder(w, r.sto, false).Encode(objs, 10); err != nil {
		return fmt.Errorf("writing pack: %w", err)
	}
	return nil
}

// writeErr sends a protocol error line, which git prints as
// "fatal: remote error: <msg>".
func writeErr(w io.Writer, msg string) error {
	if err := pktline.NewEncoder(w).EncodeString("ERR " + msg + "\n"); err != nil {
		return fmt.Errorf("writing error: %w", err)
	}
	return nil
}
