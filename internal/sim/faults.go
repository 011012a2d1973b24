package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
)

// Faults is the misbehaviour in force. The zero value is a healthy service.
//
// For each request to a faulted endpoint the simulator, in this order:
// waits Latency plus a sample of the LatencyP50/LatencyP99 distribution;
// drops the connection with probability DropRate; hangs with probability
// HangRate; answers one of ErrorRates' statuses (one draw, the statuses
// taken in ascending order, so their rates add up and must total ≤ 1)
// without doing anything; and otherwise handles the request, answering 500
// after a successful write with probability ApplyThen500Rate. A rate of 1
// always fires, 0 never.
type Faults struct {
	// Latency is added to every faulted request.
	Latency time.Duration
	// LatencyP50 and LatencyP99, when set, add a log-normal sample with
	// these quantiles (on top of Latency). P50 alone gives a fixed extra
	// P50; P99 requires P50 and must not be below it.
	LatencyP50, LatencyP99 time.Duration
	// ErrorRates maps an HTTP status (4xx or 5xx, e.g. 500, 502, 503, 429)
	// to the probability of answering it instead of handling the request.
	// 429 and 503 carry Retry-After unless RetryAfter is negative.
	ErrorRates map[int]float64
	// RetryAfter is the Retry-After of injected 429 and 503 answers and of
	// over-capacity answers (Options.Capacity), sent in whole seconds
	// rounded up. Zero means DefaultRetryAfter (1s); a negative value
	// (NoRetryAfter) sends no Retry-After at all, so that a client's
	// behaviour without one can be tested.
	RetryAfter time.Duration
	// DropRate: close the connection without answering.
	DropRate float64
	// HangRate: answer nothing until the client goes away or Close is
	// called, then close the connection.
	HangRate float64
	// ApplyThen500Rate: after a successful write (accrual, redemption,
	// onboard, link, unlink) answer 500 although the write stays applied.
	ApplyThen500Rate float64
	// LateApplyRate: answer an accrual or a redemption 504 without
	// applying it, or, under injected latency, let the client give up
	// without an answer, and apply it LateApplyDelay later, as a partner
	// whose gateway times out before its backend commits. It is drawn
	// after ErrorRates and excludes ApplyThen500Rate. The late write goes
	// through the duplicate policy when it lands, not when it arrived: a
	// repeat of its transactionId sent in between is handled as if the
	// first had never come (so it applies, and under DuplicateReject the
	// late one is then refused; under DuplicateApply both count in
	// Effects). A late write counts once in Effects, and in
	// Counters.LateApplied once it has applied. Writes still pending at
	// Close are never applied; FlushLateApplies lands them at once.
	LateApplyRate float64
	// LateApplyDelay is how long after its answer a late write is applied
	// (0: DefaultLateApplyDelay). Real time, not Options.Now.
	LateApplyDelay time.Duration
	// LookupLag hides a transaction from Lookup Transaction until this
	// long after it was applied (by Options.Now), as a partner whose reads
	// come from a lagging replica. Not limited by Endpoints.
	LookupLag time.Duration
	// NullNumbersRate: a 200 answer's data has every JSON number in it
	// (at any depth: transactionPoint, transactionAmount, usedPoint,
	// sponsorId, the balance and point fields of user-profile and
	// user-profile-ext) set to null, or, on another draw with even odds,
	// left out. The spec shows each as a number and says nothing of
	// null; a client must not read either as 0. The state is unchanged.
	NullNumbersRate float64
	// SharedIDLookup chooses which record a lookup by transactionId alone
	// answers when the member has an accrual and a redemption with that
	// id (the simulator keys transactions by id and type, as the spec's
	// separate endpoints allow): SharedIDAccrual (the default, ""),
	// SharedIDRedemption or SharedIDLatest (the one applied last). The
	// spec shows one record per lookup and does not say. Not limited by
	// Endpoints.
	SharedIDLookup string
	// Endpoints limits the faults to these Endpoint* names; empty means
	// every business and token endpoint (never the JWKS or admin API).
	Endpoints []string
}

// Faults.SharedIDLookup choices.
const (
	SharedIDAccrual    = "accrual"
	SharedIDRedemption = "redemption"
	SharedIDLatest     = "latest"
)

// DefaultLateApplyDelay is Faults.LateApplyDelay's default: longer than a
// guard lookup sent straight after a 504, shorter than a test's patience.
const DefaultLateApplyDelay = 300 * time.Millisecond

// Validate reports every invalid setting together.
func (f Faults) Validate() error {
	var errs []error
	rate := func(name string, r float64) {
		if r < 0 || r > 1 || math.IsNaN(r) {
			errs = append(errs, fmt.Errorf("%s must be in [0, 1]", name))
		}
	}
	rate("DropRate", f.DropRate)
	rate("HangRate", f.HangRate)
	rate("ApplyThen500Rate", f.ApplyThen500Rate)
	rate("LateApplyRate", f.LateApplyRate)
	rate("NullNumbersRate", f.NullNumbersRate)
	switch f.SharedIDLookup {
	case "", SharedIDAccrual, SharedIDRedemption, SharedIDLatest:
	default:
		errs = append(errs, fmt.Errorf("SharedIDLookup %q: want %s, %s or %s", f.SharedIDLookup,
			SharedIDAccrual, SharedIDRedemption, SharedIDLatest))
	}
	total := 0.0
	for _, status := range slices.Sorted(maps.Keys(f.ErrorRates)) {
		if status < 400 || status > 599 {
			errs = append(errs, fmt.Errorf("ErrorRates: status %d is not a 4xx or 5xx", status))
		}
		rate(fmt.Sprintf("ErrorRates[%d]", status), f.ErrorRates[status])
		total += f.ErrorRates[status]
	}
	if total > 1+1e-9 {
		errs = append(errs, fmt.Errorf("ErrorRates add up to %g, more than 1", total))
	}
	if f.Latency < 0 || f.LatencyP50 < 0 || f.LatencyP99 < 0 || f.LateApplyDelay < 0 || f.LookupLag < 0 {
		errs = append(errs, errors.New("durations must not be negative"))
	}
	if f.LatencyP99 > 0 && (f.LatencyP50 == 0 || f.LatencyP99 < f.LatencyP50) {
		errs = append(errs, errors.New("LatencyP99 needs LatencyP50 and must be at least LatencyP50"))
	}
	for _, e := range f.Endpoints {
		if !slices.Contains(AllEndpoints, e) {
			errs = append(errs, fmt.Errorf("endpoint %q in Endpoints is unknown (want one of %v)", e, AllEndpoints))
		}
	}
	return errors.Join(errs...)
}

func (f Faults) clone() Faults {
	f.ErrorRates = maps.Clone(f.ErrorRates)
	f.Endpoints = slices.Clone(f.Endpoints)
	return f
}

func (f Faults) applies(endpoint string) bool {
	return len(f.Endpoints) == 0 || slices.Contains(f.Endpoints, endpoint)
}

// retryAfterSeconds is the Retry-After header's value, "" for none.
func (f Faults) retryAfterSeconds() string {
	d := f.RetryAfter
	switch {
	case d < 0:
		return ""
	case d == 0:
		d = DefaultRetryAfter
	}
	return strconv.FormatInt(int64(math.Ceil(d.Seconds())), 10)
}

// faultsJSON is the admin API's form: durations as Go duration strings
// ("250ms"), statuses as object keys. retryAfter "0s" (or any duration not
// above zero) is NoRetryAfter; left out, it is the default.
type faultsJSON struct {
	Latency          string          `json:"latency,omitempty"`
	LatencyP50       string          `json:"latencyP50,omitempty"`
	LatencyP99       string          `json:"latencyP99,omitempty"`
	ErrorRates       map[int]float64 `json:"errorRates,omitempty"`
	RetryAfter       string          `json:"retryAfter,omitempty"`
	DropRate         float64         `json:"dropRate,omitempty"`
	HangRate         float64         `json:"hangRate,omitempty"`
	ApplyThen500Rate float64         `json:"applyThen500Rate,omitempty"`
	LateApplyRate    float64         `json:"lateApplyRate,omitempty"`
	LateApplyDelay   string          `json:"lateApplyDelay,omitempty"`
	LookupLag        string          `json:"lookupLag,omitempty"`
	NullNumbersRate  float64         `json:"nullNumbersRate,omitempty"`
	SharedIDLookup   string          `json:"sharedIdLookup,omitempty"`
	Endpoints        []string        `json:"endpoints,omitempty"`
}

func durationText(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

func retryAfterText(d time.Duration) string {
	if d < 0 {
		return "0s"
	}
	return durationText(d)
}

// MarshalJSON writes durations as Go duration strings and leaves zero
// settings out: {"latency":"50ms","errorRates":{"503":0.1}}.
func (f Faults) MarshalJSON() ([]byte, error) {
	return json.Marshal(faultsJSON{
		Latency: durationText(f.Latency), LatencyP50: durationText(f.LatencyP50), LatencyP99: durationText(f.LatencyP99),
		ErrorRates: f.ErrorRates, RetryAfter: retryAfterText(f.RetryAfter), DropRate: f.DropRate, HangRate: f.HangRate,
		ApplyThen500Rate: f.ApplyThen500Rate, LateApplyRate: f.LateApplyRate, LateApplyDelay: durationText(f.LateApplyDelay),
		LookupLag: durationText(f.LookupLag), NullNumbersRate: f.NullNumbersRate, SharedIDLookup: f.SharedIDLookup,
		Endpoints: f.Endpoints,
	})
}

// UnmarshalJSON reads the form MarshalJSON writes; unknown fields are
// errors so that a misspelt fault is not silently ignored.
func (f *Faults) UnmarshalJSON(b []byte) error {
	var j faultsJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return err
	}
	var errs []error
	dur := func(name, s string) time.Duration {
		if s == "" {
			return 0
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not a duration such as 250ms", name, s))
		}
		return d
	}
	*f = Faults{
		Latency: dur("latency", j.Latency), LatencyP50: dur("latencyP50", j.LatencyP50),
		LatencyP99: dur("latencyP99", j.LatencyP99), ErrorRates: j.ErrorRates,
		RetryAfter: dur("retryAfter", j.RetryAfter), DropRate: j.DropRate, HangRate: j.HangRate,
		ApplyThen500Rate: j.ApplyThen500Rate, LateApplyRate: j.LateApplyRate,
		LateApplyDelay: dur("lateApplyDelay", j.LateApplyDelay), LookupLag: dur("lookupLag", j.LookupLag),
		NullNumbersRate: j.NullNumbersRate, SharedIDLookup: j.SharedIDLookup, Endpoints: j.Endpoints,
	}
	if j.RetryAfter != "" && f.RetryAfter <= 0 {
		f.RetryAfter = NoRetryAfter
	}
	return errors.Join(errs...)
}

// faultPlan is what the fault injector decided for one request.
type faultPlan struct {
	delay        time.Duration
	drop, hang   bool
	status       int // injected error status, 0 for none
	applyThen500 bool
	lateApply    bool
	lateDelay    time.Duration
	nullNumbers  bool
	absent       bool // nullNumbers: leave the numbers out rather than null them
	retryAfter   string
}

// plan draws this request's faults. rng must be guarded by the caller.
func (f Faults) plan(rng *rand.Rand, endpoint string, write bool) faultPlan {
	var p faultPlan
	if !f.applies(endpoint) {
		return p
	}
	p.delay = f.Latency
	if f.LatencyP50 > 0 {
		p.delay += logNormal(rng, f.LatencyP50, f.LatencyP99)
	}
	fire := func(rate float64) bool { return rate > 0 && rng.Float64() < rate }
	switch {
	case fire(f.DropRate):
		p.drop = true
		return p
	case fire(f.HangRate):
		p.hang = true
		return p
	}
	if len(f.ErrorRates) > 0 {
		u, sum := rng.Float64(), 0.0
		for _, status := range slices.Sorted(maps.Keys(f.ErrorRates)) {
			sum += f.ErrorRates[status]
			if f.ErrorRates[status] > 0 && u < sum {
				p.status = status
				if status == 429 || status == 503 {
					p.retryAfter = f.retryAfterSeconds()
				}
				return p
			}
		}
	}
	if (endpoint == EndpointAccrual || endpoint == EndpointRedemption) && fire(f.LateApplyRate) {
		p.lateApply = true
		p.lateDelay = f.LateApplyDelay
		if p.lateDelay == 0 {
			p.lateDelay = DefaultLateApplyDelay
		}
		return p
	}
	p.applyThen500 = write && fire(f.ApplyThen500Rate)
	if fire(f.NullNumbersRate) {
		p.nullNumbers = true
		p.absent = rng.Float64() < 0.5
	}
	return p
}

// z99 is the standard normal 99th percentile.
const z99 = 2.326347874

// logNormal samples exp(N(ln p50, σ)) with σ chosen so that the 99th
// percentile is p99; without p99 it is p50 exactly. Capped at 100 × p99 so
// one unlucky draw cannot stall a benchmark.
func logNormal(rng *rand.Rand, p50, p99 time.Duration) time.Duration {
	if p99 <= p50 {
		return p50
	}
	sigma := (math.Log(float64(p99)) - math.Log(float64(p50))) / z99
	v := math.Exp(math.Log(float64(p50)) + sigma*rng.NormFloat64())
	return time.Duration(min(v, 100*float64(p99)))
}
