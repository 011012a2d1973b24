package pipeline

import "fmt"

// counters counts a set of records (the whole pipeline's, or one
// partition's) through the three stages a dispatched record passes. Every
// record counted in active is counted in handling, and every one counted in
// handling in inFlight: active ≤ handling ≤ inFlight, and none below zero.
// The zero value counts nothing. It is guarded by the lock of its owner.
type counters struct {
	// inFlight: dispatched and not finished (its outputs not yet all
	// acknowledged, or held for its round's transaction). Drains wait for it.
	inFlight int
	// handling: its handler (or Fallback) has not returned; the lane is held.
	handling int
	// active: handling and not waiting in Wait or Leased. MaxInFlight and
	// MaxInFlightPerPartition bound it.
	active int
}

// dispatch counts a record handed to a handler.
func (c *counters) dispatch() { c.inFlight++; c.handling++; c.active++ }

// release counts a record whose handler (and Fallback) returned: its lane
// and its slot are free, its outputs may still be on their way.
func (c *counters) release() { c.handling--; c.active-- }

// yield gives a handler's slot back while it waits (Wait, Leased).
func (c *counters) yield() { c.active-- }

// reclaim takes a yielded slot back, even above the bound (see
// Pipeline.reclaimSlot).
func (c *counters) reclaim() { c.active++ }

// finish counts a record out of flight.
func (c *counters) finish() { c.inFlight-- }

// check reports a broken invariant; the tests call it after every step.
func (c counters) check() error {
	if c.active < 0 || c.active > c.handling || c.handling > c.inFlight {
		return fmt.Errorf("pipeline: counters out of order: want 0 ≤ active %d ≤ handling %d ≤ in flight %d", c.active, c.handling, c.inFlight)
	}
	return nil
}
