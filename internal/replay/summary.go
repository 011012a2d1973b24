package replay

import (
	"fmt"
	"slices"
	"strings"
)

// Summary is what a replay did. A replay's Summary is returned with its
// error too, counting what was done before it stopped.
type Summary struct {
	// Planned is the records the replay set out to handle: for ranges the
	// offsets in them until the last record was read, then the records.
	Planned int
	// Records counts records handled: their outputs acknowledged by Kafka
	// (in a dry run: their line written).
	Records int
	// Outcomes counts records by the outcome of their output: a result's
	// outcome (APPLIED, ALREADY_APPLIED, ...), "error CATEGORY", in a dry
	// run "would replay TYPE" or "would fail DECODE|VALIDATION".
	Outcomes map[string]int
	// Retry counts handled records that still need a replay: their output
	// is a retryable error event (TRANSIENT_EXHAUSTED, AUTH, some INTERNAL)
	// or was not produced.
	Retry int
	// NotReplayable lists records that were asked for and could not be
	// replayed (an error event without its original, whose source record
	// is no longer retained; an undecodable error event).
	NotReplayable []string
	// Interrupted is set when the replay stopped before its end (context
	// ended, a read failed): Planned - Records records were not replayed.
	Interrupted bool
}

func newSummary() *Summary { return &Summary{Outcomes: map[string]int{}} }

func (s *Summary) count(res result) {
	s.Records++
	s.Outcomes[res.label]++
	if res.retry {
		s.Retry++
	}
}

// OK reports whether everything asked for was replayed and none of it
// needs another replay.
func (s *Summary) OK() bool {
	return len(s.NotReplayable) == 0 && s.Retry == 0 && !s.Interrupted
}

// maxListed bounds the not-replayable records the table names.
const maxListed = 20

// Table renders the summary for an operator.
func (s *Summary) Table() string {
	var b strings.Builder
	keys := make([]string, 0, len(s.Outcomes))
	w := len("OUTCOME")
	for k := range s.Outcomes {
		keys = append(keys, k)
		w = max(w, len(k))
	}
	slices.Sort(keys)
	fmt.Fprintf(&b, "%-*s  %8s\n", w, "OUTCOME", "RECORDS")
	for _, k := range keys {
		fmt.Fprintf(&b, "%-*s  %8d\n", w, k, s.Outcomes[k])
	}
	fmt.Fprintf(&b, "%-*s  %8d\n", w, "total", s.Records)
	if s.Retry > 0 {
		fmt.Fprintf(&b, "still failing (replay them again later): %d\n", s.Retry)
	}
	for i, n := range s.NotReplayable {
		if i == maxListed {
			fmt.Fprintf(&b, "... and %d more not replayable\n", len(s.NotReplayable)-maxListed)
			break
		}
		fmt.Fprintf(&b, "not replayable: %s\n", n)
	}
	if s.Interrupted {
		fmt.Fprintf(&b, "interrupted: %d of %d planned records not replayed\n", max(0, s.Planned-s.Records), s.Planned)
	}
	return b.String()
}
