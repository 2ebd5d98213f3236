package store

import (
	"context"
	"fmt"
)

// FailAbandonedBuilds ends as failed, with reason as their error, every
// build still running, and wakes their log readers; it returns how many it
// ended. It is for a process that runs every build of the platform
// (embedded mode), at its start, before it takes pushes: a build running
// then was cut short by the process before it, and nothing will finish it.
func (s *Store) FailAbandonedBuilds(ctx context.Context, reason string) (int, error) {
	rows, err := s.pool.Query(ctx,
		"WITH ended AS (UPDATE builds SET status = 'failed', error = $1, finished_at = now() "+
			"WHERE status = 'running' RETURNING id) "+
			"SELECT id::text, pg_notify($2, id::text) FROM ended", reason, buildLogsChannel)
	if err != nil {
		return 0, fmt.Errorf("failing abandoned builds: %w", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("failing abandoned builds: %w", err)
	}
	return n, nil
}
