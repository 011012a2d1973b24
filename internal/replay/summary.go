package replay

import (
	"fmt"
	"maps"
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
	// NotReplayable lists, one line each and by position only (never a
	// value), what was asked for and not replayed: an undecodable error
	// event, and every error event or record counted in Mismatched,
	// SourceGone or Refused.
	NotReplayable []string

	// FromSource and FromErrorOriginals say where the records a replay
	// from error events set out to handle came from: read at their source
	// position (the default), or taken from the original carried in an
	// error event because the source no longer holds them (only with
	// Options.TrustErrorOriginals).
	FromSource, FromErrorOriginals int
	// Mismatched counts source records not replayed because an error event
	// naming them carries an original that differs from them (or, when the
	// source is gone, from another error event's original): either the
	// error topic was written by someone other than the bridge, or the
	// source topic was recreated. Neither version is replayed.
	Mismatched int
	// SourceGone counts source records no longer held by their topic
	// (below its log start, or compacted away) and not replayed: their
	// error events carry no original, or Options.TrustErrorOriginals is
	// not set.
	SourceGone int
	// Refused counts error events refused without reading any record:
	// their source is not a position of the input topic whose error topic
	// was read (another topic, no such partition, an offset not yet
	// written).
	Refused int
	// Interrupted is set when the replay stopped before its end (context
	// ended, a read failed): Planned - Records records were not replayed.
	Interrupted bool
	// GaveUp says why the replay gave up (Options.MaxWait, FailFast): the
	// partner is still failing, and Planned - Records records were not
	// replayed; replay them later.
	GaveUp string

	fromErrors bool // a replay from error events: Table shows the rows above
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
	return len(s.NotReplayable) == 0 && s.Mismatched == 0 && s.SourceGone == 0 && s.Refused == 0 &&
		s.Retry == 0 && !s.Interrupted && s.GaveUp == ""
}

// StillFailing is the line that tells an operator (and a script's log) to
// replay later: how many records were replayed of those planned, and how
// many still need a replay (not finished, or ended retryable again).
func (s *Summary) StillFailing() string {
	return fmt.Sprintf("still failing, replay later: %d of %d planned records replayed, %d not finished, %d ended in a retryable error again",
		s.Records-s.Retry, s.Planned, max(0, s.Planned-s.Records), s.Retry)
}

// Labels of the rows of Table that count a replay from error events by
// provenance and by what kept a record from being replayed.
const (
	LabelFromSource         = "replayed from their source"
	LabelFromErrorOriginals = "replayed from error-event originals"
	LabelMismatched         = "not replayed: original differs from source"
	LabelSourceGone         = "not replayed: source gone"
	LabelRefused            = "refused: source outside the input topic"
)

// maxListed bounds the not-replayable records the table names.
const maxListed = 20

// Table renders the summary for an operator.
func (s *Summary) Table() string {
	var b strings.Builder
	type row struct {
		label string
		n     int
	}
	var rows, extra []row
	for _, k := range slices.Sorted(maps.Keys(s.Outcomes)) {
		rows = append(rows, row{k, s.Outcomes[k]})
	}
	rows = append(rows, row{"total", s.Records})
	if s.fromErrors {
		extra = []row{{LabelFromSource, s.FromSource}, {LabelFromErrorOriginals, s.FromErrorOriginals},
			{LabelMismatched, s.Mismatched}, {LabelSourceGone, s.SourceGone}, {LabelRefused, s.Refused}}
	}
	w := len("OUTCOME")
	for _, r := range append(slices.Clone(rows), extra...) {
		w = max(w, len(r.label))
	}
	fmt.Fprintf(&b, "%-*s  %8s\n", w, "OUTCOME", "RECORDS")
	for _, r := range rows {
		fmt.Fprintf(&b, "%-*s  %8d\n", w, r.label, r.n)
	}
	if len(extra) > 0 {
		b.WriteString("\n")
		for _, r := range extra {
			fmt.Fprintf(&b, "%-*s  %8d\n", w, r.label, r.n)
		}
	}
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
	if s.GaveUp != "" {
		fmt.Fprintf(&b, "gave up: %s\n%s\n", s.GaveUp, s.StillFailing())
	}
	return b.String()
}
