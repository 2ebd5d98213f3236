package scheduler

import (
	"errors"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"bex.co/bex/apis/scheduling"
)

// ReservationTTL is how long a reservation holds a pool's room when its
// Placement is not seen changed: the caller failed to write it, or went
// away. kube-scheduler's assumed Pods expire likewise when their binding
// does not come.
const ReservationTTL = 30 * time.Second

// PlacementKey names a Placement.
type PlacementKey struct {
	Namespace, Name string
}

// Reservations is the scheduler's assume cache. A review whose answer the
// caller will record as a Placement (spec.reserve) holds the chosen
// pool's room for that Placement, so that the reviews that follow, which
// do not see the Placement yet, count it; like kube-scheduler's
// AssumePod before a binding. A reservation ends when the placement
// totals count a change of its Placement made after the review (Seen),
// when a later reserving review of the same Placement replaces it, or
// after its time to live.
//
// Its methods are safe for concurrent use. The View answers reserving
// reviews one at a time under its lock, so that no two of them take the
// same room.
type Reservations struct {
	ttl time.Duration

	mu   sync.Mutex
	held map[PlacementKey]*reservation
}

// reservation is the room held for one Placement.
type reservation struct {
	pool PoolKey
	room
	// after is the placements version of the review's snapshot: a change
	// of the Placement counted at that version or before came before the
	// review, and does not end the reservation.
	after uint64
	// seen is the placements version that first counts a change of the
	// Placement made after the review; 0 while there is none. From that
	// version on the totals hold the Placement as it is now.
	seen    uint64
	expires time.Time
}

// NewReservations returns an empty cache whose reservations live at most
// ttl (ReservationTTL in the server).
func NewReservations(ttl time.Duration) (*Reservations, error) {
	if ttl <= 0 {
		return nil, errors.New("scheduler: reservations need a positive time to live")
	}
	return &Reservations{ttl: ttl, held: map[PlacementKey]*reservation{}}, nil
}

// Seen tells that the Placement key changed (created, updated or
// deleted), and that placement totals read at version v or later count
// the change. The placement index calls it for each of its events.
func (r *Reservations) Seen(key PlacementKey, v uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if res, ok := r.held[key]; ok && res.seen == 0 && v > res.after {
		res.seen = v
	}
}

// Len is how many reservations are held, ended or not yet pruned.
func (r *Reservations) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.held)
}

// extra returns what the reservations add to placement totals read at
// version v, at time now, leaving out the reservation of except (which
// the review being answered replaces). It drops the reservations that
// expired, and those that totals at v count already. The caller holds
// r.mu.
func (r *Reservations) extra(v uint64, now time.Time, except PlacementKey) map[PoolKey]room {
	var out map[PoolKey]room
	for key, res := range r.held {
		if now.After(res.expires) || (res.seen != 0 && res.seen <= v) {
			delete(r.held, key)
			continue
		}
		// A reservation seen at a version newer than v still counts:
		// totals read at v do not count its Placement yet.
		if key == except {
			continue
		}
		if out == nil {
			out = map[PoolKey]room{}
		}
		out[res.pool] = out[res.pool].plus(res.room)
	}
	return out
}

// reserve holds need on pool for key, replacing key's reservation, for a
// review over totals read at version v. The caller holds r.mu.
func (r *Reservations) reserve(key PlacementKey, pool PoolKey, need scheduling.Capacity, v uint64, now time.Time) {
	r.held[key] = &reservation{
		pool: pool, room: roomOf(need),
		after: v, expires: now.Add(r.ttl),
	}
}

// release ends key's reservation. The caller holds r.mu.
func (r *Reservations) release(key PlacementKey) { delete(r.held, key) }

// room is an amount of CPU (millicores), memory (bytes) and pods.
type room struct {
	cpu, memory, pods int64
}

func roomOf(c scheduling.Capacity) room {
	return room{cpu: c.CPU.MilliValue(), memory: c.Memory.Value(), pods: c.Pods}
}

func (a room) plus(b room) room {
	return room{cpu: a.cpu + b.cpu, memory: a.memory + b.memory, pods: a.pods + b.pods}
}

// withHeld returns the pool with held added to what it requests, in
// quantities of its own: the caller's pool shares its quantities with a
// snapshot.
func withHeld(p scheduling.PoolCapacity, held room) scheduling.PoolCapacity {
	req := roomOf(p.Requested).plus(held)
	p.Requested = scheduling.Capacity{
		CPU:    *resource.NewMilliQuantity(req.cpu, resource.DecimalSI),
		Memory: *resource.NewQuantity(req.memory, resource.BinarySI),
		Pods:   req.pods,
	}
	return p
}
