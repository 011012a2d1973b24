package benchkit

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/ledger"
)

// Scenario specs: several partner behaviours measured in one run, each
// beside the fault-free run of the same invocation (Config.Scenarios).

// ScenarioClean is the spec of the fault-free scenario every other one
// is compared with.
const ScenarioClean = "clean"

// Knobs of a scenario spec.
const (
	KnobRetryAfter         = "retry-after"          // Retry-After of 429/503 answers: a duration, or 0/none for none
	KnobCapacity           = "capacity"             // Scenario.Capacity
	KnobOverCapacityStatus = "over-capacity-status" // 429 or 503; needs capacity
	KnobLatency            = "latency"              // Scenario.Latency
	KnobMaxInFlight        = "max-in-flight"        // Scenario.MaxInFlight
	KnobReplicas           = "replicas"             // Scenario.Replicas
	KnobCredentialsOutage  = "credentials-outage"   // Scenario.CredentialsOutage; bare: DefaultCredentialsOutage
	KnobDelivery           = "delivery"             // Scenario.Delivery: at-least-once or exactly-once
	KnobRollingRestart     = "rolling-restart"      // Scenario.RollingRestart; bare
	KnobLedgerAge          = "ledger-age"           // Scenario.LedgerAge
)

// DefaultCredentialsOutage is how long a bare credentials-outage knob
// keeps the bridge's credentials revoked.
const DefaultCredentialsOutage = 30 * time.Second

// MaxReplicas bounds Scenario.Replicas: every replica is a bridge process
// on the same machine.
const MaxReplicas = 16

// NamedScenario is one scenario of a multi-scenario run; Name is its
// spec as written (spaces removed), which is how the report labels it.
type NamedScenario struct {
	Name     string
	Scenario Scenario
}

// Clean reports whether this is the fault-free reference.
func (n NamedScenario) Clean() bool { return n.Name == ScenarioClean }

// knobList names the knobs for error messages.
var knobList = "STATUS=RATE (e.g. 503=0.1), " + strings.Join([]string{KnobRetryAfter + "=1s|none", KnobCapacity + "=N",
	KnobOverCapacityStatus + "=429|503", KnobLatency + "=10ms", KnobMaxInFlight + "=N", KnobReplicas + "=N",
	KnobCredentialsOutage + "[=30s]", KnobDelivery + "=at-least-once|exactly-once", KnobRollingRestart,
	KnobLedgerAge + "=2h"}, ", ")

// ParseScenario reads a scenario spec and applies it to base with base's
// faults cleared (error rates, Retry-After, capacity, replicas, outage,
// delivery, restarts, ledger age):
// a spec states the whole of its partner's misbehaviour.
//
// A spec is "clean" (no faults) or comma-separated knobs:
//
//	503=0.1,retry-after=1s      10% of business calls answered 503 with Retry-After: 1
//	500=0.05,429=0.05           the shares add up (as --error-rate)
//	capacity=32,over-capacity-status=429,latency=10ms,max-in-flight=256
//	capacity=32,replicas=3      three bridge processes in one group
//	credentials-outage=30s      the bridge's credentials refused for 30 s mid-run
//	delivery=exactly-once       the bridge's --delivery (the others have none)
//	replicas=3,rolling-restart  the three restarted one after another mid-run
//	ledger-age=2h               the bridge's ledger as a deployment's two hours after its rollout
//
// The error names the spec and the part that is wrong.
func ParseScenario(spec string, base Scenario) (NamedScenario, error) {
	name := strings.Join(strings.Fields(spec), "")
	sc := base
	sc.ErrorRates, sc.RetryAfter, sc.Capacity, sc.OverCapacityStatus = nil, 0, 0, 0
	sc.Replicas, sc.CredentialsOutage, sc.Delivery, sc.RollingRestart = 0, 0, "", false
	sc.LedgerAge = 0
	if name == ScenarioClean {
		return NamedScenario{Name: name, Scenario: sc}, nil
	}
	if name == "" {
		return NamedScenario{}, fmt.Errorf("scenario %q is empty: want %s or knobs: %s", spec, ScenarioClean, knobList)
	}
	var errs []string
	bad := func(part, format string, args ...any) {
		errs = append(errs, fmt.Sprintf("%q: %s", part, fmt.Sprintf(format, args...)))
	}
	seen := map[string]bool{}
	for _, part := range strings.Split(name, ",") {
		if part == "" {
			bad(part, "empty knob (a stray comma?)")
			continue
		}
		key, val, hasVal := strings.Cut(part, "=")
		if status, err := strconv.Atoi(key); err == nil {
			rate, rerr := strconv.ParseFloat(val, 64)
			switch {
			case status < 400 || status > 599:
				bad(part, "status %d is not a 4xx or 5xx", status)
			case !hasVal || rerr != nil || math.IsNaN(rate) || rate <= 0 || rate > 1:
				bad(part, "want STATUS=RATE with a rate in (0, 1], e.g. 503=0.1")
			case sc.ErrorRates[status] != 0:
				bad(part, "status %d given twice", status)
			default:
				if sc.ErrorRates == nil {
					sc.ErrorRates = map[int]float64{}
				}
				sc.ErrorRates[status] = rate
			}
			continue
		}
		if seen[key] {
			bad(part, "%s given twice", key)
			continue
		}
		seen[key] = true
		if key == KnobRollingRestart {
			if hasVal {
				bad(part, "%s takes no value", key)
			}
			sc.RollingRestart = true
			continue
		}
		if !hasVal && key != KnobCredentialsOutage {
			if isKnob(key) {
				bad(part, "%s needs a value (%s=…)", key, key)
			} else {
				bad(part, "unknown knob %q; want %s, or %s alone", key, knobList, ScenarioClean)
			}
			continue
		}
		switch key {
		case KnobRetryAfter:
			if val == "none" || val == "0" {
				sc.RetryAfter = -1
				break
			}
			d, err := time.ParseDuration(val)
			switch {
			case err != nil || d < 0:
				bad(part, "want a duration such as 1s, or none")
			case d == 0:
				sc.RetryAfter = -1
			default:
				sc.RetryAfter = d
			}
		case KnobCapacity, KnobMaxInFlight, KnobReplicas:
			n, err := strconv.Atoi(val)
			if err != nil || n < 1 {
				bad(part, "want a whole number of at least 1")
				break
			}
			switch key {
			case KnobCapacity:
				sc.Capacity = n
			case KnobMaxInFlight:
				sc.MaxInFlight = n
			case KnobReplicas:
				if n > MaxReplicas {
					bad(part, "at most %d replicas", MaxReplicas)
				}
				sc.Replicas = n
			}
		case KnobOverCapacityStatus:
			n, err := strconv.Atoi(val)
			if err != nil || (n != 429 && n != 503) {
				bad(part, "want 429 or 503")
				break
			}
			sc.OverCapacityStatus = n
		case KnobLatency:
			d, err := time.ParseDuration(val)
			if err != nil || d < 0 {
				bad(part, "want a duration such as 10ms")
				break
			}
			sc.Latency = d
		case KnobDelivery:
			if val != DeliveryAtLeastOnce && val != DeliveryExactlyOnce {
				bad(part, "want %s or %s", DeliveryAtLeastOnce, DeliveryExactlyOnce)
				break
			}
			sc.Delivery = val
		case KnobCredentialsOutage:
			if !hasVal {
				sc.CredentialsOutage = DefaultCredentialsOutage
				break
			}
			d, err := time.ParseDuration(val)
			if err != nil || d <= 0 {
				bad(part, "want a positive duration such as 30s")
				break
			}
			sc.CredentialsOutage = d
		case KnobLedgerAge:
			d, err := time.ParseDuration(val)
			switch {
			case err != nil || d <= 0:
				bad(part, "want a positive duration such as 2h")
			case d >= ledger.DefaultWindow:
				bad(part, "want less than the ledger's window, %s: older entries are forgotten", ledger.DefaultWindow)
			default:
				sc.LedgerAge = d
			}
		default:
			bad(part, "unknown knob %q; want %s, or %s alone", key, knobList, ScenarioClean)
		}
	}
	if sc.OverCapacityStatus != 0 && sc.Capacity == 0 {
		errs = append(errs, fmt.Sprintf("%s needs %s", KnobOverCapacityStatus, KnobCapacity))
	}
	total := 0.0
	for _, r := range sc.ErrorRates {
		total += r
	}
	if total > 1+1e-9 {
		errs = append(errs, fmt.Sprintf("error rates add up to %g, more than 1", total))
	}
	if len(errs) > 0 {
		return NamedScenario{}, fmt.Errorf("scenario %q: %s", name, strings.Join(errs, "; "))
	}
	return NamedScenario{Name: name, Scenario: sc}, nil
}

func isKnob(k string) bool {
	switch k {
	case KnobRetryAfter, KnobCapacity, KnobOverCapacityStatus, KnobLatency, KnobMaxInFlight, KnobReplicas, KnobCredentialsOutage, KnobDelivery,
		KnobRollingRestart, KnobLedgerAge:
		return true
	}
	return false
}

// ParseScenarios reads every spec against base and puts the fault-free
// reference first: the clean spec where given, else one added. A spec
// given twice is an error.
func ParseScenarios(specs []string, base Scenario) ([]NamedScenario, error) {
	var (
		out  []NamedScenario
		errs []error
	)
	for _, s := range specs {
		n, err := ParseScenario(s, base)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if n.Clean() {
			if len(out) > 0 && out[0].Clean() {
				errs = append(errs, fmt.Errorf("scenario %q given twice", n.Name))
			}
			out = append([]NamedScenario{n}, out...)
			continue
		}
		for _, o := range out {
			if o.Name == n.Name {
				errs = append(errs, fmt.Errorf("scenario %q given twice", n.Name))
			}
		}
		out = append(out, n)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(out) > 0 && !out[0].Clean() {
		clean, _ := ParseScenario(ScenarioClean, base)
		out = append([]NamedScenario{clean}, out...)
	}
	return out, nil
}
