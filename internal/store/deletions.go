package store

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// Kinds of ArtifactDeletion.
const (
	// DeleteReleaseDirectory is a pruned release's unpacked directory;
	// Target is the release number.
	DeleteReleaseDirectory = "release-directory"
	// DeleteImage is an image no kept release runs; Target is the image by
	// digest.
	DeleteImage = "image"
)

// ArtifactDeletion is something of an app the platform has to delete,
// recorded until it is done so that a deletion that failed is tried again.
type ArtifactDeletion struct {
	ID int64
	// Kind is DeleteReleaseDirectory or DeleteImage.
	Kind   string
	Target string
	// Reason says why it goes: "release v3 pruned".
	Reason    string
	Attempts  int
	LastError string
}

// pendingDeletionLimit bounds what PendingDeletions returns at once.
const pendingDeletionLimit = 500

// queueDeletionSQL records that a target goes; one whose deletion was done
// before (the same image built again since) is to do again.
const queueDeletionSQL = "INSERT INTO artifact_deletions (tenant_id, app, kind, target, reason) VALUES ($1, $2, $3, $4, $5) " +
	"ON CONFLICT (tenant_id, app, kind, target) DO UPDATE " +
	"SET done_at = NULL, attempts = 0, last_error = '', last_attempt_at = NULL, reason = EXCLUDED.reason " +
	"WHERE artifact_deletions.done_at IS NOT NULL"

// QueueDeletion records that target of kind (DeleteImage,
// DeleteReleaseDirectory) of the app is to be deleted, for reason. The
// pipeline records a build's image as soon as it is built: a release that
// runs it keeps it (PendingDeletions drops it), and an image whose release
// failed, or was cut short, goes at the next prune.
func (s *Store) QueueDeletion(ctx context.Context, tenantID, app, kind, target, reason string) error {
	if kind != DeleteImage && kind != DeleteReleaseDirectory {
		return fmt.Errorf("%w deletion kind %q", ErrInvalid, kind)
	}
	if !isUUID(tenantID) {
		return fmt.Errorf("%w tenant ID %q", ErrInvalid, tenantID)
	}
	if _, err := s.pool.Exec(ctx, queueDeletionSQL, tenantID, app, kind, target, reason); err != nil {
		return fmt.Errorf("recording the deletion of %s: %w", target, err)
	}
	return nil
}

// PendingDeletions returns the app's deletions still to do, oldest first.
// An image a kept release runs again (the same digest built and released
// since) is dropped from them first: it stays. A failed release runs
// nothing: its image is deleted unless a kept release that went out runs
// it.
func (s *Store) PendingDeletions(ctx context.Context, tenantID, app string) ([]ArtifactDeletion, error) {
	if !isUUID(tenantID) {
		return nil, nil
	}
	var out []ArtifactDeletion
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx,
			"DELETE FROM artifact_deletions d WHERE d.tenant_id = $1 AND d.app = $2 AND d.done_at IS NULL AND d.kind = 'image' "+
				"AND EXISTS (SELECT 1 FROM releases r WHERE r.tenant_id = d.tenant_id AND r.app = d.app AND r.image = d.target AND r.pruned_at IS NULL AND r.status = 'succeeded')",
			tenantID, app); err != nil {
			return err
		}
		rows, err := tx.Query(ctx,
			"SELECT id, kind, target, reason, attempts, last_error FROM artifact_deletions "+
				"WHERE tenant_id = $1 AND app = $2 AND done_at IS NULL ORDER BY id LIMIT "+strconv.Itoa(pendingDeletionLimit),
			tenantID, app)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (ArtifactDeletion, error) {
			var d ArtifactDeletion
			err := row.Scan(&d.ID, &d.Kind, &d.Target, &d.Reason, &d.Attempts, &d.LastError)
			return d, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listing the pending deletions of %s: %w", app, err)
	}
	return out, nil
}

// FinishDeletion records an attempt at deletion id: done when failure is
// nil, else to be tried again, with failure kept as its last error.
func (s *Store) FinishDeletion(ctx context.Context, id int64, failure error) error {
	var err error
	if failure == nil {
		_, err = s.pool.Exec(ctx,
			"UPDATE artifact_deletions SET done_at = now(), attempts = attempts + 1, last_attempt_at = now() WHERE id = $1", id)
	} else {
		_, err = s.pool.Exec(ctx,
			"UPDATE artifact_deletions SET attempts = attempts + 1, last_error = $2, last_attempt_at = now() WHERE id = $1",
			id, failure.Error())
	}
	if err != nil {
		return fmt.Errorf("recording deletion %d: %w", id, err)
	}
	return nil
}
