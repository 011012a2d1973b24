package pipeline

import "time"

// Observer receives the pipeline's events, for metrics. Methods are called
// from the pipeline's goroutines and franz-go's, sometimes with the
// pipeline's lock held: they must be safe for concurrent use, fast, and must
// not call back into the Pipeline. Embed NopObserver to implement only some.
type Observer interface {
	// RecordStarted is called when a record is dispatched to a handler.
	RecordStarted(topic string, partition int32, fresh bool)
	// RecordDone is called when a record leaves flight, with how long it
	// was in flight.
	RecordDone(topic string, partition int32, outcome Outcome, inFlight time.Duration)
	// InFlight reports the in-flight and buffered record counts whenever
	// they change.
	InFlight(inFlight, buffered int)
	// CommitPoint is called when a partition's contiguous done point
	// advances to next and is marked for commit.
	CommitPoint(topic string, partition int32, next int64)
	// Paused is called when fetching a partition is paused because its
	// buffer is full, or resumed.
	Paused(topic string, partition int32, paused bool)
	// Assigned is called when partitions are assigned (assigned true),
	// when their revocation starts, before the drain (lost false), and when
	// they are lost (lost true).
	Assigned(topic string, partitions []int32, assigned bool, lost bool)
	// Released is called when revoked or lost partitions are dropped:
	// after a revocation's drain (or its DrainTimeout), at once after a
	// loss. No record of them is dispatched again until they are assigned
	// anew; only a handler that outlived a drain's timeout, or a lost
	// partition's handler being cut, may still be returning. State kept
	// per partition for the records (the transaction ledger's) can go
	// here: the draining records needed it until now.
	Released(topic string, partitions []int32)
}

// Outcome is how a record left flight.
type Outcome uint8

const (
	// Processed: the handler's outputs were all acknowledged.
	Processed Outcome = iota
	// FellBack: Fallback's outputs were all acknowledged.
	FellBack
	// Abandoned: the partition was revoked or lost, or shutdown's drain
	// timed out; the record is not committed.
	Abandoned
	// Failed: neither handler nor fallback succeeded; the pipeline stops.
	Failed
)

func (o Outcome) String() string {
	switch o {
	case Processed:
		return "processed"
	case FellBack:
		return "fell_back"
	case Abandoned:
		return "abandoned"
	case Failed:
		return "failed"
	}
	return "unknown"
}

// NopObserver ignores every event.
type NopObserver struct{}

func (NopObserver) RecordStarted(string, int32, bool)                {}
func (NopObserver) RecordDone(string, int32, Outcome, time.Duration) {}
func (NopObserver) InFlight(int, int)                                {}
func (NopObserver) CommitPoint(string, int32, int64)                 {}
func (NopObserver) Paused(string, int32, bool)                       {}
func (NopObserver) Assigned(string, []int32, bool, bool)             {}
func (NopObserver) Released(string, []int32)                         {}
