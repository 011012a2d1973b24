package telemetry

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/trace"

	"github.com/loyalty-bridge/loyalty-bridge/internal/apiendpoint"
)

// Namespace prefixes every metric the bridge registers.
const Namespace = "loyalty_bridge"

// Metrics is the bridge's set of Prometheus collectors, registered on its own
// registry (no global state). Safe for concurrent use.
type Metrics struct {
	Registry *prometheus.Registry
	// Exemplars, set before the first call when tracing is on, puts the
	// trace id of a sampled call on its latency (observe). Off, the
	// transport does not even look for a span.
	Exemplars bool

	RecordsConsumed  *prometheus.CounterVec   // topic
	RecordsCompleted *prometheus.CounterVec   // topic, outcome (result outcome, or "error")
	ErrorEvents      *prometheus.CounterVec   // topic, category
	APICalls         *prometheus.CounterVec   // endpoint, status (HTTP code, or "error")
	APILatency       *prometheus.HistogramVec // endpoint
	APIRetries       *prometheus.CounterVec   // endpoint
	GuardLookups     *prometheus.CounterVec   // result: found, not_found, not_applied, other_kind, unrecognised, error
	// UnrecognisedAnswers counts partner answers the partner profile does
	// not name, by field (errorCode, transactionType, status,
	// transactionPoint, sharedTransactionId).
	UnrecognisedAnswers *prometheus.CounterVec
	AlreadyApplied      *prometheus.CounterVec // topic
	LedgerAnswered      *prometheus.CounterVec // topic: duplicates answered from the transaction ledger
	// RefundKeyMismatches counts refunds keyed neither by loyaltyId nor by
	// originalTransactionId, by topic and action (refused, warned).
	RefundKeyMismatches *prometheus.CounterVec
	// RefundsParked counts refunds set aside on the parked topic because
	// the partner did not know their original purchase yet (each
	// parking, a refund parked again included); RefundsGivenUp, those
	// that waited --original-wait in vain and became retryable error
	// events.
	RefundsParked    prometheus.Counter
	RefundsGivenUp   prometheus.Counter
	TokenRefreshes   *prometheus.CounterVec // result: ok, error; one per grant call (see TokenGrant)
	CircuitState     prometheus.Gauge       // 0 closed, 1 half-open, 2 open
	AuthFailures     prometheus.Counter     // attempts and probes refused for the credentials
	AuthHeld         prometheus.Gauge       // 1 while records are held for refused credentials
	HeldUnrecognised prometheus.Gauge       // records held on lookup answers the partner profile does not name
	InFlight         prometheus.Gauge
	APICallsInFlight prometheus.Gauge     // partner requests holding a call slot
	ConcurrencyLimit prometheus.Gauge     // the partner call limit in force (adaptive, or --max-in-flight)
	Held             prometheus.Gauge     // records held back while the circuit is open
	CommittedOffset  *prometheus.GaugeVec // topic, partition
	Lag              *prometheus.GaugeVec // topic, partition: high watermark − committed
}

// NewMetrics builds and registers every collector, plus the Go runtime and
// process collectors.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	m := &Metrics{Registry: reg}

	m.RecordsConsumed = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
		Name: "records_consumed_total", Help: "Input records taken from Kafka."}, []string{"topic"})
	m.RecordsCompleted = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
		Name: "records_completed_total", Help: "Input records that reached their terminal output, by outcome (\"error\" for error events); counted when the output is made, before Kafka acknowledges it."},
		[]string{"topic", "outcome"})
	m.ErrorEvents = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
		Name: "error_events_total", Help: "Error events produced, by category."}, []string{"topic", "category"})
	m.APICalls = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
		Name: "api_calls_total", Help: "HTTP calls to the partner API (every attempt), by endpoint and status."},
		[]string{"endpoint", "status"})
	m.APILatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace,
		Name: "api_call_duration_seconds", Help: "Latency of partner API calls (one attempt).",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}},
		[]string{"endpoint"})
	m.APIRetries = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
		Name: "api_retries_total", Help: "Partner API attempts beyond the first."}, []string{"endpoint"})
	m.GuardLookups = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
		Name: "guard_lookups_total", Help: "Idempotency-guard lookups before a call that might repeat an earlier one."},
		[]string{"result"})
	m.UnrecognisedAnswers = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
		Name: "unrecognised_answers_total", Help: "Lookup answers whose error code, transactionType or status the partner profile does not name (--partner-*), or that found the transactionId as the other kind's transaction from a partner keyed by id and type (field sharedTransactionId): each holds its record, never written (held_unrecognised_records)."},
		[]string{"field"})
	m.HeldUnrecognised = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace,
		Name: "held_unrecognised_records", Help: "Records held now, nothing written, on lookup answers the partner profile does not name (unrecognised_answers_total by field); each ends as a retryable TRANSIENT_EXHAUSTED UNRECOGNISED_ANSWER error event after --unrecognised-hold."})
	m.AlreadyApplied = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
		Name: "already_applied_total", Help: "Records answered ALREADY_APPLIED instead of a second effect."}, []string{"topic"})
	m.LedgerAnswered = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
		Name: "ledger_answered_total", Help: "Records answered from the transaction ledger without a partner call: their transaction was settled already (a duplicate event, a record redone after an offsets reset, a replay)."}, []string{"topic"})
	m.RefundKeyMismatches = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
		Name: "refund_key_mismatches_total", Help: "Refunds whose record key is neither their loyaltyId nor their originalTransactionId, which the clawback cap needs (one process per original); action refused (an error event, --refund-key-check refuse) or warned (handled anyway)."},
		[]string{"topic", "action"})
	m.RefundsParked = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace,
		Name: "refunds_parked_total", Help: "Refunds parked (set aside on the parked topic, their input partition going on) because the partner did not know their original purchase yet; a refund parked again counts again."})
	m.RefundsGivenUp = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace,
		Name: "refunds_given_up_total", Help: "Parked refunds whose original was still unknown after --original-wait: each became a retryable TRANSIENT_EXHAUSTED error event, reason ORIGINAL_NOT_FOUND."})
	m.TokenRefreshes = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
		Name: "token_refreshes_total", Help: "Access-token grants (login, refresh, exchange), by result."}, []string{"result"})
	m.CircuitState = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace,
		Name: "circuit_state", Help: "Partner API circuit: 0 closed, 1 half-open, 2 open."})
	m.AuthFailures = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace,
		Name: "auth_failures_total", Help: "Partner API attempts and hold probes refused for the credentials (a refused token grant, or a 401 to a renewed token); each holds records instead of ending them."})
	m.AuthHeld = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace,
		Name: "auth_held", Help: "1 while the partner refuses the credentials and records are held, else 0."})
	m.InFlight = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace,
		Name: "in_flight_records", Help: "Records dispatched and not yet completed (calling the partner or waiting to retry)."})
	m.APICallsInFlight = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace,
		Name: "api_calls_in_flight", Help: "Partner API requests holding a call slot (at most concurrency_limit, which is at most --max-in-flight); in_flight_records minus this is records waiting to retry, for a call slot, or for the group lease."})
	m.ConcurrencyLimit = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace,
		Name: "concurrency_limit", Help: "Partner API requests allowed in progress now: adapts between 1 and --max-in-flight to the partner's push-backs and latency (--adaptive-concurrency), else --max-in-flight."})
	m.Held = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace,
		Name: "held_records", Help: "Records polled but held back (circuit open or partition window full)."})
	m.CommittedOffset = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace,
		Name: "committed_offset", Help: "Last offset committed for the consumer group."}, []string{"topic", "partition"})
	m.Lag = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace,
		Name: "consumer_lag", Help: "High watermark minus committed offset, per partition."}, []string{"topic", "partition"})

	for _, c := range []prometheus.Collector{m.RecordsConsumed, m.RecordsCompleted, m.ErrorEvents, m.APICalls,
		m.APILatency, m.APIRetries, m.GuardLookups, m.UnrecognisedAnswers, m.HeldUnrecognised, m.AlreadyApplied, m.LedgerAnswered, m.RefundKeyMismatches, m.RefundsParked, m.RefundsGivenUp, m.TokenRefreshes, m.CircuitState, m.AuthFailures, m.AuthHeld,
		m.InFlight, m.APICallsInFlight, m.ConcurrencyLimit, m.Held, m.CommittedOffset, m.Lag,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		f(c)
	}
	return m
}

// SetOffsets records the committed offset and lag of one partition.
func (m *Metrics) SetOffsets(topic string, partition int32, committed, highWatermark int64) {
	p := strconv.Itoa(int(partition))
	m.CommittedOffset.WithLabelValues(topic, p).Set(float64(committed))
	lag := highWatermark - committed
	if lag < 0 {
		lag = 0
	}
	m.Lag.WithLabelValues(topic, p).Set(float64(lag))
}

// ForgetPartition removes a partition's offset and lag series, when this
// member no longer owns it (another member reports it now).
func (m *Metrics) ForgetPartition(topic string, partition int32) {
	p := strconv.Itoa(int(partition))
	m.CommittedOffset.DeleteLabelValues(topic, p)
	m.Lag.DeleteLabelValues(topic, p)
}

// TokenGrant counts one access-token grant call by its result ("ok" when
// err is nil, "error" otherwise). It is what tokensource.CacheOptions.OnGrant
// should be: the cache calls it once per grant, however many HTTP requests
// the grant made (a refused refresh followed by a login is one grant) and
// also for a grant that failed before any request (a partner key that
// cannot sign).
func (m *Metrics) TokenGrant(err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.TokenRefreshes.WithLabelValues(result).Inc()
}

// OtherEndpoint labels a request that does not name its endpoint (see
// internal/apiendpoint): a request no partner API client made.
const OtherEndpoint = "other"

// InstrumentTransport wraps rt so every partner API attempt is counted by
// endpoint and status and timed. The endpoint is the name the request's
// context carries (apiendpoint.From: the loyalty client and the token
// grants set it), OtherEndpoint when none; it is never guessed from the
// URL, so path parameters such as loyaltyId cannot become labels. It does not count token grants: a grant
// may make two requests (a refused refresh, then a login) or none, so
// TokenGrant, called by the token cache, counts them. nil rt means
// http.DefaultTransport.
func (m *Metrics) InstrumentTransport(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		ep, ok := apiendpoint.From(req.Context())
		if !ok {
			ep = OtherEndpoint
		}
		start := time.Now()
		resp, err := rt.RoundTrip(req)
		if m.Exemplars {
			observe(req.Context(), m.APILatency.WithLabelValues(ep), time.Since(start).Seconds())
		} else {
			m.APILatency.WithLabelValues(ep).Observe(time.Since(start).Seconds())
		}
		status := "error"
		if err == nil {
			status = strconv.Itoa(resp.StatusCode)
		}
		m.APICalls.WithLabelValues(ep, status).Inc()
		return resp, err
	})
}

// observe puts v in h, with the trace id of ctx's span as its exemplar
// when that span is sampled (tracing on): a dashboard can then go from a
// slow bucket to the trace of one of its calls. Without one it is a plain
// Observe, at the cost of a context lookup.
func observe(ctx context.Context, h prometheus.Observer, v float64) {
	if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() {
		if eo, ok := h.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(v, prometheus.Labels{ExemplarTraceID: sc.TraceID().String()})
			return
		}
	}
	h.Observe(v)
}

// ExemplarTraceID is the exemplar label that holds a trace id.
const ExemplarTraceID = "trace_id"

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
