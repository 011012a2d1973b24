package benchkit

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/ledger"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// Scenario is the work every contestant does. The zero value is not
// valid; start from DefaultScenario.
type Scenario struct {
	// Events is the backlog size.
	Events int `json:"events"`
	// Partitions of the input topic (and of the reply topics).
	Partitions int32 `json:"partitions"`
	// Keys is the number of distinct loyaltyIds, which are the record keys.
	// The simulator seeds exactly that many members.
	Keys int `json:"keys"`
	// Latency is a fixed delay the simulator adds to every API call.
	Latency time.Duration `json:"latency"`
	// LatencyP50 and LatencyP99 add a log-normal delay with these
	// quantiles on top of Latency (a tail); zero: none.
	LatencyP50 time.Duration `json:"latencyP50,omitempty"`
	LatencyP99 time.Duration `json:"latencyP99,omitempty"`
	// ErrorRates maps an HTTP status to the share of business calls the
	// simulator answers with it instead of handling them (a degraded
	// partner); RetryAfter is the Retry-After of its 429 and 503 answers
	// (0: the simulator's default).
	ErrorRates map[int]float64 `json:"errorRates,omitempty"`
	RetryAfter time.Duration   `json:"retryAfter,omitempty"`
	// Capacity, when positive, is how many business requests the
	// simulator handles at once; the excess is answered at once with
	// OverCapacityStatus (503 or 429) and Retry-After (a partner that
	// sheds load).
	Capacity           int `json:"capacity,omitempty"`
	OverCapacityStatus int `json:"overCapacityStatus,omitempty"`
	// MaxInFlight is the bridge's --max-in-flight and the ceiling's number
	// of concurrent callers.
	MaxInFlight int `json:"maxInFlight"`
	// MaxInFlightPerPartition is the bridge's --max-in-flight-per-partition
	// (0: the bridge's default).
	MaxInFlightPerPartition int `json:"maxInFlightPerPartition,omitempty"`
	// Rate, when positive, writes the events at this many per second while
	// the contestant runs (open loop) instead of as a backlog before it
	// starts: latency then measures the pipeline, not the queue.
	Rate int `json:"rate,omitempty"`
	// BaselineEvents caps the baseline's backlog (0: Events). The baseline
	// is slow by design; its rate is steady, so a prefix measures it.
	BaselineEvents int `json:"baselineEvents,omitempty"`
	// Seed makes the key and amount of every event, and the simulator's
	// latency samples, reproducible.
	Seed int64 `json:"seed"`
	// Replicas, above 1, runs that many bridge processes in one consumer
	// group against the one simulator (replicas sharing a partner); the
	// other contestants run once. 0 or 1: one.
	Replicas int `json:"replicas,omitempty"`
	// CredentialsOutage, when positive, makes the simulator refuse the
	// bridge's credentials for this long mid-run: once a quarter of the
	// records are answered it rotates the client secret and password and
	// revokes every token, then restores them. Bridge only.
	CredentialsOutage time.Duration `json:"credentialsOutage,omitempty"`
	// Delivery, when set, is the bridge's --delivery (DeliveryAtLeastOnce
	// or DeliveryExactlyOnce), so that both modes are measured in one
	// invocation. Bridge only.
	Delivery string `json:"delivery,omitempty"`
	// RollingRestart restarts the bridge's replicas one after another
	// mid-run, as a rolling deploy does: replica i is stopped (SIGTERM: a
	// clean drain and release) once (i+1)/(replicas+1) of the records are
	// answered, and a new process takes its place as soon as it has
	// exited. Bridge only.
	RollingRestart bool `json:"rollingRestart,omitempty"`
	// LedgerAge, when positive, makes the bridge's ledger as old as a
	// deployment's this long after the ledger's rollout: before the bridge
	// starts, the bench creates the ledger topic and writes into it one
	// settled entry per input partition dated LedgerAge ago. Past
	// ledger.RolloutMargin, the ledger's silence about a record then means
	// "never sent" (ledger.Covers), and a partition's new owner looks up
	// at the partner only the records the ledger has intents for. 0: the
	// bridge creates the ledger at start-up, and the run measures the
	// first hour after a rollout. Less than ledger.DefaultWindow. The
	// ceiling and the baseline have no ledger.
	LedgerAge time.Duration `json:"ledgerAge,omitempty"`
}

// The bridge's --delivery values a scenario can set.
const (
	DeliveryAtLeastOnce = "at-least-once"
	DeliveryExactlyOnce = "exactly-once"
)

// replicas is how many bridge processes the scenario runs.
func (s Scenario) replicas() int { return max(1, s.Replicas) }

// bridgeOnly reports whether only the bridge is measured: replicas, a
// credentials outage, a delivery mode and restarts mean nothing to the
// ceiling and the baseline.
func (s Scenario) bridgeOnly() bool {
	return s.replicas() > 1 || s.CredentialsOutage > 0 || s.Delivery != "" || s.RollingRestart
}

// DefaultScenario is a latency-bound drain of 10,000 events: 20 ms per
// call, 8 partitions, 10,000 keys, 256 in flight.
func DefaultScenario() Scenario {
	return Scenario{Events: 10_000, Partitions: 8, Keys: 10_000, Latency: 20 * time.Millisecond,
		MaxInFlight: pipeline.DefaultMaxInFlight, BaselineEvents: 4_000, Seed: 1}
}

// Validate reports every problem together.
func (s Scenario) Validate() error {
	var errs []error
	if s.Events < 1 {
		errs = append(errs, errors.New("events must be at least 1"))
	}
	if s.Partitions < 1 {
		errs = append(errs, errors.New("partitions must be at least 1"))
	}
	if s.Keys < 1 || s.Keys > sim.MaxMembers {
		errs = append(errs, fmt.Errorf("keys must be in [1, %d]", sim.MaxMembers))
	}
	if s.MaxInFlight < 1 {
		errs = append(errs, errors.New("max in-flight must be at least 1"))
	}
	if s.MaxInFlightPerPartition < 0 || s.BaselineEvents < 0 || s.Rate < 0 {
		errs = append(errs, errors.New("per-partition in-flight, baseline events and rate must not be negative"))
	}
	if err := s.faults().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("faults: %w", err))
	}
	if s.Capacity < 0 {
		errs = append(errs, errors.New("capacity must not be negative"))
	}
	if s.Replicas < 0 || s.Replicas > MaxReplicas {
		errs = append(errs, fmt.Errorf("replicas must be in [0, %d]", MaxReplicas))
	}
	if s.CredentialsOutage < 0 {
		errs = append(errs, errors.New("credentials outage must not be negative"))
	}
	if s.LedgerAge < 0 || s.LedgerAge >= ledger.DefaultWindow {
		errs = append(errs, fmt.Errorf("ledger age %s: want at least 0 and less than the ledger's window, %s", s.LedgerAge, ledger.DefaultWindow))
	}
	switch s.OverCapacityStatus {
	case 0, 429, 503:
	default:
		errs = append(errs, fmt.Errorf("over-capacity status %d: want 429 or 503", s.OverCapacityStatus))
	}
	return errors.Join(errs...)
}

// baselineEvents is the baseline's share of the backlog.
func (s Scenario) baselineEvents() int {
	if s.BaselineEvents > 0 && s.BaselineEvents < s.Events {
		return s.BaselineEvents
	}
	return s.Events
}

// faults is the simulator's misbehaviour for the scenario: latency on
// every business and token endpoint, error answers on business calls only
// (the token leg is a separate partner service).
func (s Scenario) faults() sim.Faults {
	// RetryAfter also applies to over-capacity answers.
	f := sim.Faults{Latency: s.Latency, LatencyP50: s.LatencyP50, LatencyP99: s.LatencyP99, RetryAfter: s.RetryAfter}
	if len(s.ErrorRates) > 0 {
		f.ErrorRates = s.ErrorRates
		f.Endpoints = []string{sim.EndpointCustomerInfo, sim.EndpointCustomerProfile, sim.EndpointOnboard, sim.EndpointLink,
			sim.EndpointUnlink, sim.EndpointRedemption, sim.EndpointAccrual, sim.EndpointLookup}
	}
	return f
}

// simOptions are the simulator's options for the scenario.
func (s Scenario) simOptions() sim.Options {
	return sim.Options{Members: s.Keys, Faults: s.faults(), Seed: s.Seed, Capacity: s.Capacity,
		OverCapacityStatus: s.OverCapacityStatus}
}

// FaultText describes the scenario's misbehaviour: "10% 503 (Retry-After
// 1s), capacity 32 (429 beyond), credentials refused for 30s", or "".
func (s Scenario) FaultText() string {
	var parts []string
	statuses := make([]int, 0, len(s.ErrorRates))
	for st := range s.ErrorRates {
		statuses = append(statuses, st)
	}
	slices.Sort(statuses)
	for _, st := range statuses {
		parts = append(parts, fmt.Sprintf("%g%% %d", 100*s.ErrorRates[st], st))
	}
	retry := ""
	switch {
	case len(s.ErrorRates) == 0 && s.Capacity == 0:
	case s.RetryAfter > 0:
		retry = fmt.Sprintf(" (Retry-After %s)", s.RetryAfter)
	case s.RetryAfter < 0:
		retry = " (no Retry-After)"
	}
	if len(parts) > 0 {
		parts[len(parts)-1] += retry
		retry = ""
	}
	if s.Capacity > 0 {
		c := fmt.Sprintf("capacity %d", s.Capacity)
		if s.OverCapacityStatus != 0 {
			c += fmt.Sprintf(" (%d beyond)", s.OverCapacityStatus)
		}
		parts = append(parts, c+retry)
	}
	if s.CredentialsOutage > 0 {
		parts = append(parts, fmt.Sprintf("credentials refused for %s", s.CredentialsOutage))
	}
	return strings.Join(parts, ", ")
}

// LatencyText describes the simulated latency: "20ms", "0s", "5ms + p50 10ms/p99 80ms".
func (s Scenario) LatencyText() string {
	t := s.Latency.String()
	if s.LatencyP50 > 0 {
		t += fmt.Sprintf(" + p50 %s/p99 %s", s.LatencyP50, max(s.LatencyP99, s.LatencyP50))
	}
	return t
}

// txPrefix starts every transactionId of the bench; the rest is the
// event's index, which is how replies are matched to inputs.
const txPrefix = "bench-"

// TransactionID is the transactionId of event i.
func TransactionID(i int) string { return txPrefix + strconv.Itoa(i) }

// eventIndex parses a transactionId made by TransactionID; -1 if it is
// not one.
func eventIndex(txID []byte) int {
	s, ok := strings.CutPrefix(string(txID), txPrefix)
	if !ok {
		return -1
	}
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 {
		return -1
	}
	return i
}

// mix is splitmix64: a cheap, well-spread hash of (seed, i) so that any
// process can build event i alone, without a shared random stream.
func mix(seed int64, i int) uint64 {
	z := uint64(seed)*0x9e3779b97f4a7c15 + uint64(i)*0xbf58476d1ce4e5b9 + 1
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Event builds event i of the backlog: a uniformly drawn member key, an
// amount between 10,000 and 1,000,000 VND, an item and a description, as
// a storefront would send. at is its transactionDate.
func (s Scenario) Event(i int, at time.Time) *events.PurchaseCompleted {
	h := mix(s.Seed, i)
	member := 1 + int(h%uint64(s.Keys))
	amount := float64(10+(h>>32)%991) * 1000
	item := "SKU-" + strconv.Itoa(int((h>>16)%5000))
	desc := `{"channel":"bench","sku":"` + item + `","qty":1}`
	return &events.PurchaseCompleted{
		TransactionID: TransactionID(i), LoyaltyID: sim.MemberID(member), ItemID: &item,
		TransactionDate: at.Truncate(time.Millisecond), Amount: amount, Currency: "VND", Description: &desc,
	}
}

// AccrualRequest maps a purchase to the API call the bridge makes for it;
// the ceiling and the baseline use it so all three send the same bodies.
func AccrualRequest(ev *events.PurchaseCompleted) loyalty.AccrualRequest {
	r := loyalty.AccrualRequest{LoyaltyID: ev.LoyaltyID, TransactionID: ev.TransactionID,
		TransactionDate: loyalty.TransactionDate{Time: ev.TransactionDate}, TransactionAmount: ev.Amount,
		TransactionCurrency: ev.Currency}
	if ev.ItemID != nil {
		r.ItemID = *ev.ItemID
	}
	if ev.Description != nil {
		r.TransactionDes = json.RawMessage(*ev.Description)
	}
	if ev.ExtraData != nil {
		r.ExtraData = json.RawMessage(*ev.ExtraData)
	}
	return r
}
