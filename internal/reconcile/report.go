package reconcile

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
)

// FindingKind is what a finding says.
type FindingKind string

// Finding kinds. All but Unchecked are mismatches between the bridge's
// replies and the partner's records.
const (
	// Missing: a result says APPLIED or ALREADY_APPLIED, and the partner
	// has no such transaction.
	Missing FindingKind = "MISSING"
	// NotApplied: a result says APPLIED or ALREADY_APPLIED, and the
	// partner holds the transaction with a failed status (the profile's
	// FailedStatuses): recorded, but it took no effect. Not Missing: the
	// partner does have the transactionId, and whether it takes the same
	// transactionId again (a replay) is the partner's to say, so a person
	// has to look, not a replay to be run blindly.
	NotApplied FindingKind = "NOT_APPLIED"
	// Differs: the partner has it, with other points, amount or
	// bitReference than the result (or the input record it answers).
	Differs FindingKind = "DIFFERS"
	// ErrorButApplied: only error events answer the transaction, and the
	// partner has it applied.
	ErrorButApplied FindingKind = "ERROR_BUT_APPLIED"
	// NotRecognised: the classifier does not recognise the partner's
	// answer (Unrecognised); nothing is guessed.
	NotRecognised FindingKind = "UNRECOGNISED"
	// Unchecked: the transaction could not be looked up (no answer, no
	// loyaltyId to ask with).
	Unchecked FindingKind = "UNCHECKED"
	// ClawbackOverEarned: the applied clawback slots of an original
	// (<original>~cb1, ~cb2, …) took more points than the original earned
	// (its transactionPoint; nothing when the partner holds no applied
	// accrual). The finding's transactionId is the original's.
	ClawbackOverEarned FindingKind = "CLAWBACK_OVER_EARNED"
	// SharedClawback: the results of two or more refunds name one
	// clawbackTransactionId. One clawback stands for several refunds:
	// clawed back too little (a refund took an equal twin's clawback for
	// its own), or too much (two writes of the slot applied at a partner
	// that applies a repeated transactionId). The finding's transactionId
	// is the clawback's.
	SharedClawback FindingKind = "SHARED_CLAWBACK"
)

// Finding is one transaction that needs a person's attention.
type Finding struct {
	Kind          FindingKind      `json:"kind"`
	Topic         string           `json:"topic"` // the input topic
	TransactionID string           `json:"transactionId"`
	EventType     events.EventType `json:"eventType"`
	// Reply is the position (topic/partition/offset) of the reply record
	// the finding is about.
	Reply  string `json:"reply"`
	Detail string `json:"detail"`
}

// Report is what a reconciliation found. It holds transaction ids,
// positions, points and amounts, and no personal data.
type Report struct {
	Since time.Time  `json:"since"`
	Until *time.Time `json:"until,omitempty"`
	// Topics are the input topics whose replies were read.
	Topics []string `json:"topics"`
	// Replies is the reply records read in the window.
	Replies int `json:"replies"`
	// Checked is the transactions looked up.
	Checked int `json:"checked"`
	// Agreed is the transactions looked up whose replies agree with the
	// partner's record (or, for failures, that the partner does not have).
	Agreed int `json:"agreed"`
	// Skipped counts reply records (or transactions) not checked, by why.
	Skipped map[string]int `json:"skipped,omitempty"`
	// Originals is the originals, named by the refund results'
	// clawbackTransactionIds, whose clawback slots were looked up and
	// summed against what they earned.
	Originals int `json:"originals,omitempty"`
	// Interrupted is the lookups not made because the run was stopped
	// (and originals not summed).
	Interrupted int       `json:"interrupted,omitempty"`
	Findings    []Finding `json:"findings"`
}

func (r *Report) skip(why string) { r.Skipped[why]++ }

// Count is the findings of kind k.
func (r *Report) Count(k FindingKind) int {
	n := 0
	for _, f := range r.Findings {
		if f.Kind == k {
			n++
		}
	}
	return n
}

// Mismatches is the findings other than Unchecked.
func (r *Report) Mismatches() int { return len(r.Findings) - r.Count(Unchecked) }

// OK reports whether every transaction was checked and agreed.
func (r *Report) OK() bool { return len(r.Findings) == 0 && r.Interrupted == 0 }

// Problem says in one line what is wrong, "" when OK.
func (r *Report) Problem() string {
	var p []string
	if n := r.Mismatches(); n > 0 {
		p = append(p, fmt.Sprintf("%d mismatches with the partner's records", n))
	}
	if n := r.Count(Unchecked); n > 0 {
		p = append(p, fmt.Sprintf("%d transactions not checked", n))
	}
	if r.Interrupted > 0 {
		p = append(p, fmt.Sprintf("interrupted: %d lookups not made", r.Interrupted))
	}
	return strings.Join(p, ", ")
}

// Table is the report for people: the counts, then one line per finding.
func (r *Report) Table() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	window := "from " + r.Since.UTC().Format(time.RFC3339)
	if r.Until != nil {
		window += " to " + r.Until.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(&b, "replies to %s %s\n", strings.Join(r.Topics, ", "), window)
	fmt.Fprintf(w, "reply records read\t%d\n", r.Replies)
	fmt.Fprintf(w, "transactions looked up\t%d\n", r.Checked)
	fmt.Fprintf(w, "  as the partner has them\t%d\n", r.Agreed)
	for _, k := range []FindingKind{Missing, NotApplied, Differs, ErrorButApplied, ClawbackOverEarned, SharedClawback, NotRecognised, Unchecked} {
		fmt.Fprintf(w, "  %s\t%d\n", k, r.Count(k))
	}
	fmt.Fprintf(w, "originals whose clawbacks were summed\t%d\n", r.Originals)
	if r.Interrupted > 0 {
		fmt.Fprintf(w, "  not looked up (interrupted)\t%d\n", r.Interrupted)
	}
	for _, why := range slices.Sorted(maps.Keys(r.Skipped)) {
		fmt.Fprintf(w, "skipped: %s\t%d\n", why, r.Skipped[why])
	}
	w.Flush()
	if len(r.Findings) == 0 {
		return b.String()
	}
	fs := slices.Clone(r.Findings)
	slices.SortStableFunc(fs, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.TransactionID, b.TransactionID))
	})
	b.WriteString("\n")
	w = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "KIND\tTRANSACTION\tEVENT\tREPLY\tDETAIL")
	for _, f := range fs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", f.Kind, f.TransactionID, f.EventType, f.Reply, f.Detail)
	}
	w.Flush()
	return b.String()
}
