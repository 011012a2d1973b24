package ordering

import (
	"fmt"
	"math"
	"sort"
)

// Tracker tracks the offsets taken from one partition and which of them are
// done, and reports the commit point: the offset after the highest offset
// below which every taken offset is done. The zero value is ready to use.
//
// Memory is proportional to Len, the number of taken offsets not yet below
// the commit point; the caller bounds it by bounding what it takes.
type Tracker struct {
	q       ring[entry]
	next    int64 // commit point, valid if moved
	epoch   int32 // leader epoch of the record before next
	moved   bool
	last    int64 // highest offset added, valid if added
	added   bool
	notDone int // entries not done
	bytes   int // sizes of the entries held
}

type entry struct {
	offset int64
	epoch  int32
	size   int32
	done   bool
}

// Add records that offset, read under the given leader epoch, was taken.
// Offsets must be added in strictly increasing order; Add panics otherwise,
// because a violation means the caller lost track of the partition.
func (t *Tracker) Add(offset int64, epoch int32) { t.AddSized(offset, epoch, 0) }

// AddSized is Add for a record of size bytes (the caller's measure), which
// Bytes counts until the commit point passes it.
func (t *Tracker) AddSized(offset int64, epoch int32, size int) {
	if t.added && offset <= t.last {
		panic(fmt.Sprintf("ordering: offset %d added after %d", offset, t.last))
	}
	size = min(max(size, 0), math.MaxInt32)
	t.bytes += size
	t.q.push(entry{offset: offset, epoch: epoch, size: int32(size)})
	t.last, t.added = offset, true
	t.notDone++
}

// Done marks offset done and reports whether the commit point advanced.
// Marking an offset that was never added, or is already below the commit
// point, is an error: it means the caller has mixed up partitions or
// assignments.
func (t *Tracker) Done(offset int64) (advanced bool, err error) {
	n := t.q.len()
	i := sort.Search(n, func(i int) bool { return t.q.at(i).offset >= offset })
	if i == n || t.q.at(i).offset != offset {
		return false, fmt.Errorf("ordering: offset %d is not outstanding", offset)
	}
	e := t.q.at(i)
	if e.done {
		return false, fmt.Errorf("ordering: offset %d is already done", offset)
	}
	e.done = true
	t.notDone--
	if i != 0 {
		return false, nil
	}
	for t.q.len() > 0 && t.q.at(0).done {
		e := t.q.pop()
		t.bytes -= int(e.size)
		t.next, t.epoch, t.moved = e.offset+1, e.epoch, true
	}
	return true, nil
}

// Commit returns the commit point (the next offset to consume, as Kafka
// commits it) with the leader epoch of the record before it. ok is false
// while no taken offset has been done contiguously from the first one.
func (t *Tracker) Commit() (next int64, epoch int32, ok bool) {
	return t.next, t.epoch, t.moved
}

// First returns the lowest taken offset at or above the commit point: the
// first record a commit cannot yet pass. ok is false when there is none.
func (t *Tracker) First() (offset int64, ok bool) {
	if t.q.len() == 0 {
		return 0, false
	}
	return t.q.at(0).offset, true
}

// Len returns how many taken offsets are at or above the commit point, done
// or not.
func (t *Tracker) Len() int { return t.q.len() }

// Bytes returns the sizes given to AddSized of the offsets Len counts.
func (t *Tracker) Bytes() int { return t.bytes }

// Pending returns how many taken offsets are not done.
func (t *Tracker) Pending() int { return t.notDone }
