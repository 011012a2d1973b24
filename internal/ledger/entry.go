package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Kind is what a transactionId names at the partner: the bridge writes
// accruals, redemptions and refunds' clawbacks, each keyed apart, since one
// transactionId may name an accrual and a redemption (an order paid partly
// with points).
type Kind byte

// Kinds of entries.
const (
	Accrual    Kind = 'a'
	Redemption Kind = 'r'
	Refund     Kind = 'f'
)

func (k Kind) String() string {
	switch k {
	case Accrual:
		return "accrual"
	case Redemption:
		return "redemption"
	case Refund:
		return "refund"
	}
	return fmt.Sprintf("kind(%q)", byte(k))
}

func (k Kind) valid() bool { return k == Accrual || k == Redemption || k == Refund }

// State is how far a transaction got.
type State string

// States of an entry.
const (
	// Intent: a write was about to be sent (and may have been).
	Intent State = "intent"
	// Settled: the record was answered with a result (Outcome).
	Settled State = "settled"
)

// Entry is one transaction's latest state. Only ids, points and the
// partner's references: never personal data.
type Entry struct {
	Kind          Kind   `json:"-"`
	TransactionID string `json:"-"`
	State         State  `json:"s"`
	// Where the record came from.
	Topic     string `json:"t"`
	Partition int32  `json:"p"`
	Offset    int64  `json:"o"`
	// At is when the entry was made: for an intent, when its write was
	// about to be sent.
	At time.Time `json:"at"`
	// ClawbackID is a refund's clawback slot: for an intent, the slot it
	// is about to write; settled, the slot that holds its clawback.
	ClawbackID string `json:"cb,omitempty"`
	// A settled entry's result, enough to answer a duplicate.
	Outcome         string `json:"out,omitempty"`
	Points          *int64 `json:"pt,omitempty"`
	UsedPoint       *int64 `json:"up,omitempty"`
	RequestedPoints *int64 `json:"rp,omitempty"`
	BitReference    string `json:"br,omitempty"`
	RequestID       string `json:"rq,omitempty"`
	APITimestamp    string `json:"ts,omitempty"`
}

// Key is the entry's record key: kind, a slash, transactionId.
func Key(k Kind, transactionID string) string { return string(k) + "/" + transactionID }

// parseKey reverses Key.
func parseKey(key []byte) (Kind, string, error) {
	if len(key) < 3 || key[1] != '/' || !Kind(key[0]).valid() {
		return 0, "", fmt.Errorf("ledger key %q: want <a|r|f>/<transactionId>", clipKey(key))
	}
	return Kind(key[0]), string(key[2:]), nil
}

func clipKey(key []byte) []byte {
	if len(key) > 64 {
		return key[:64]
	}
	return key
}

// encode is the entry's record value.
func (e *Entry) encode() ([]byte, error) {
	if !e.Kind.valid() || e.TransactionID == "" {
		return nil, fmt.Errorf("ledger entry %s/%q: no kind or transactionId", e.Kind, e.TransactionID)
	}
	if e.State != Intent && e.State != Settled {
		return nil, fmt.Errorf("ledger entry %s: state %q", Key(e.Kind, e.TransactionID), e.State)
	}
	return json.Marshal(e)
}

// errForeign marks a record this version does not read (another schema):
// skipped, so that a newer bridge's entries never stop an older one.
var errForeign = errors.New("ledger: entry not understood")

// decode reads one record of the ledger topic.
func decode(key, value []byte) (*Entry, error) {
	k, id, err := parseKey(key)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errForeign, err)
	}
	e := &Entry{}
	if err := json.Unmarshal(value, e); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errForeign, Key(k, id), err)
	}
	if e.State != Intent && e.State != Settled {
		return nil, fmt.Errorf("%w: %s: state %q", errForeign, Key(k, id), e.State)
	}
	e.Kind, e.TransactionID = k, id
	return e, nil
}
