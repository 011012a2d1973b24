package config

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/callimit"
	"github.com/loyalty-bridge/loyalty-bridge/internal/circuit"
	"github.com/loyalty-bridge/loyalty-bridge/internal/flagenv"
	"github.com/loyalty-bridge/loyalty-bridge/internal/ordering"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
	"github.com/loyalty-bridge/loyalty-bridge/internal/telemetry"
)

// DefaultBreakerRatio is the bridge's failure ratio that opens the circuit
// (the breaker's own default is off): with 20 or more attempts in 30 s, a
// partner failing half of them is in trouble even when a success now and
// then resets the consecutive count.
const DefaultBreakerRatio = 0.5

// Processing is how records are worked: ordering, concurrency, buffering,
// commits, per-record attempts, the circuit and what outputs carry.
type Processing struct {
	Ordering                ordering.Mode
	MaxInFlight             int
	AdaptiveConcurrency     bool
	MaxInFlightPerPartition int
	MaxBuffered             int
	MaxBufferedMiB          int
	CommitInterval          time.Duration
	DrainTimeout            time.Duration
	ShutdownTimeout         time.Duration
	TakeoverWait            time.Duration
	Linger                  time.Duration
	RecordAttempts          int
	RecordBackoff           time.Duration
	UnrecognisedHold        time.Duration
	BreakerFailures         int
	BreakerRatio            float64
	BreakerOpen             time.Duration
	Enrich                  bool
	IncludeOriginal         bool
	RefundKeyCheck          bridge.RefundKeyCheck

	ordering           *choice[ordering.Mode]
	refundKeyCheck     *choice[bridge.RefundKeyCheck]
	defaultMaxInFlight int // 0: pipeline.DefaultMaxInFlight
}

// Define defines the section's flags on b's flag set and binds them.
func (p *Processing) Define(b *flagenv.Binder) {
	fs := b.FlagSet()
	p.ordering = defineChoice(fs, &p.Ordering, "ordering", ordering.Key, ordering.ParseMode, "order within a partition: key, partition or unordered")
	maxInFlight := pipeline.DefaultMaxInFlight
	if p.defaultMaxInFlight > 0 {
		maxInFlight = p.defaultMaxInFlight
	}
	fs.IntVar(&p.MaxInFlight, "max-in-flight", maxInFlight, "the most partner API calls in progress at once, across all partitions: the ceiling the adaptive limit moves under (--adaptive-concurrency), else the limit itself (a record waiting to retry, or a write waiting for the group lease, holds none)")
	fs.BoolVar(&p.AdaptiveConcurrency, "adaptive-concurrency", true, "adapt the partner calls in progress between 1 and --max-in-flight to what the partner sustains: fewer on 429, 503, timeouts and rising latency, more while calls are healthy (false: always --max-in-flight)")
	fs.IntVar(&p.MaxInFlightPerPartition, "max-in-flight-per-partition", 0, "records handled at once per partition (0: no bound of its own)")
	fs.IntVar(&p.MaxBuffered, "max-buffered", 0, "records taken from Kafka and not yet committed: waiting, calling, waiting to retry, or done behind one that is not (0: 1,024 per MiB of --max-buffered-mib, at least 4 × --max-in-flight)")
	fs.IntVar(&p.MaxBufferedMiB, "max-buffered-mib", pipeline.DefaultMaxBufferedBytes>>20, "memory for those records, keys, values and bookkeeping, in MiB: the window behind a record that waits (a Retry-After); one partition takes at most half")
	fs.DurationVar(&p.CommitInterval, "commit-interval", pipeline.DefaultCommitInterval, "how often completed offsets are committed")
	fs.DurationVar(&p.DrainTimeout, "drain-timeout", pipeline.DefaultDrainTimeout, "how long a revoke or shutdown waits for in-flight records")
	fs.DurationVar(&p.ShutdownTimeout, "shutdown-timeout", pipeline.DefaultDrainTimeout+pipeline.DefaultShutdownMargin,
		"bound on a graceful shutdown, from the signal to exit: drain, produce, commit, leave the group (must exceed --drain-timeout)")
	fs.DurationVar(&p.TakeoverWait, "takeover-wait", 0,
		"how long a partition taken over uncleanly (a crash, an expulsion) holds its guarded records, so that the previous owner's last writes have landed before they are looked up "+
			"(0: --api-timeout + --partner-apply-window + "+pipeline.DefaultTakeoverMargin.String()+"; a value below --api-timeout + --partner-apply-window is refused)")
	fs.DurationVar(&p.Linger, "linger", pipeline.DefaultLinger, "producer linger")
	fs.IntVar(&p.RecordAttempts, "record-attempts", bridge.DefaultRecordAttempts, "attempts per record at transient API failures while the circuit allows them, then TRANSIENT_EXHAUSTED")
	fs.DurationVar(&p.RecordBackoff, "record-backoff", bridge.DefaultRetryBackoff, "base back-off between a record's attempts (full jitter)")
	fs.DurationVar(&p.UnrecognisedHold, "unrecognised-hold", bridge.DefaultUnrecognisedHold,
		"how long a record is held, nothing written and no attempt spent, on lookup answers the partner profile does not name (an unknown code, type or status; a transactionId found as the other kind), asking again with back-off up to a minute; then a retryable TRANSIENT_EXHAUSTED error event, reason UNRECOGNISED_ANSWER")
	p.BreakerFailures = circuit.DefaultConsecutiveFailures
	fs.Var(offInt{&p.BreakerFailures}, "breaker-failures",
		"consecutive failed API attempts that open the circuit; off (or 0) turns the circuit breaker off altogether, ratio included: records are not held while the partner fails, each spends its --record-attempts and ends as an error event")
	fs.Float64Var(&p.BreakerRatio, "breaker-failure-ratio", DefaultBreakerRatio, "share of failed attempts (of 20 or more in 30 s) that opens the circuit; 0 turns the ratio off")
	fs.DurationVar(&p.BreakerOpen, "breaker-open-timeout", circuit.DefaultOpenTimeout, "how long the circuit stays open before a probe")
	fs.BoolVar(&p.Enrich, "enrich", false, "add non-PII profile fields (tierClass, status, eKycStatus) to member results")
	fs.BoolVar(&p.IncludeOriginal, "include-original", false, "carry the original record key and value in error events; they may hold personal data, which every reader of the error topics would see (off: replay reads originals from their source position)")
	p.refundKeyCheck = defineChoice(fs, &p.RefundKeyCheck, "refund-key-check", bridge.DefaultRefundKeyCheck, bridge.ParseRefundKeyCheck,
		"a refund keyed neither by its loyaltyId nor by its originalTransactionId: refuse (a VALIDATION error event, reason REFUND_KEY, retryable; nothing called) or warn (handled, counted and logged: unsafe against a partner that applies a repeated transactionId, where two members may claw back one original past what it earned)")
}

// Validate reports every problem of the section, each naming its flag.
func (p *Processing) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	errs = append(errs, p.ordering.check("ordering"), p.refundKeyCheck.check("refund-key-check"))
	if p.MaxInFlight < 1 {
		bad("--max-in-flight %d: must be at least 1", p.MaxInFlight)
	}
	if p.MaxInFlightPerPartition < 0 {
		bad("--max-in-flight-per-partition %d: must not be negative", p.MaxInFlightPerPartition)
	}
	if p.MaxBuffered != 0 && p.MaxBuffered < p.MaxInFlight {
		bad("--max-buffered %d: must be at least --max-in-flight (%d)", p.MaxBuffered, p.MaxInFlight)
	}
	if p.MaxBufferedMiB < 1 || p.MaxBufferedMiB > 1<<20 {
		bad("--max-buffered-mib %d: want 1 to 1048576", p.MaxBufferedMiB)
	}
	if p.RecordAttempts < 1 {
		bad("--record-attempts %d: must be at least 1", p.RecordAttempts)
	}
	if p.BreakerFailures < 0 {
		bad("--breaker-failures %d: want a number of failures, or off (0)", p.BreakerFailures)
	}
	if p.BreakerRatio < 0 || p.BreakerRatio > 1 {
		bad("--breaker-failure-ratio %v: want 0 to 1", p.BreakerRatio)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"commit-interval", p.CommitInterval}, {"drain-timeout", p.DrainTimeout}, {"shutdown-timeout", p.ShutdownTimeout},
		{"breaker-open-timeout", p.BreakerOpen}, {"unrecognised-hold", p.UnrecognisedHold}} {
		if d.v <= 0 {
			bad("--%s %s: must be positive", d.name, d.v)
		}
	}
	if p.DrainTimeout > 0 && p.ShutdownTimeout > 0 && p.ShutdownTimeout <= p.DrainTimeout {
		bad("--shutdown-timeout %s: must exceed --drain-timeout (%s), which is part of the shutdown", p.ShutdownTimeout, p.DrainTimeout)
	}
	if p.Linger < 0 || p.RecordBackoff < 0 {
		bad("--linger and --record-backoff must not be negative")
	}
	if p.TakeoverWait < 0 {
		bad("--takeover-wait %s: must not be negative (0: the default)", p.TakeoverWait)
	}
	return errors.Join(errs...)
}

// Buffered is --max-buffered with its default filled in.
func (p *Processing) Buffered() int {
	if p.MaxBuffered > 0 {
		return p.MaxBuffered
	}
	return max(4*p.MaxInFlight, p.MaxBufferedMiB<<10)
}

// Build returns the pipeline options the section sets. --max-in-flight
// bounds both the partner calls (API.Build's MaxCalls) and the records
// handled at once; a record waiting out a back-off or a Retry-After gives
// its slot back meanwhile (pipeline.Wait), so it keeps neither a call slot
// nor another record from being handled. The window behind it is the
// buffer, bounded by --max-buffered-mib.
//
// One partition may buffer half of it (or --max-in-flight-per-partition
// if more): a partition whose commit point is stuck behind a waiting
// record must not take the whole buffer from the others.
func (p *Processing) Build() pipeline.Options {
	buffered := p.Buffered()
	perPartition := max(buffered/2, 1)
	handling := p.MaxInFlight
	if p.MaxInFlightPerPartition > 0 {
		handling = min(p.MaxInFlightPerPartition, p.MaxInFlight)
		perPartition = max(perPartition, handling)
	}
	return pipeline.Options{Mode: p.Ordering, MaxInFlight: p.MaxInFlight, MaxInFlightPerPartition: handling,
		MaxBuffered: buffered, MaxBufferedPerPartition: perPartition, MaxBufferedBytes: p.MaxBufferedMiB << 20,
		CommitInterval: p.CommitInterval, DrainTimeout: p.DrainTimeout, ShutdownTimeout: p.ShutdownTimeout, Linger: p.Linger,
		TakeoverWait: p.TakeoverWait}
}

// BuildCallLimit returns the limit on partner calls in progress that the
// section sets (API.Build's BuildOptions.Calls): adaptive between 1 and
// --max-in-flight, or fixed at --max-in-flight with
// --adaptive-concurrency=false. log gets a line per large change, onLimit
// the limit whenever it changes (a gauge).
func (p *Processing) BuildCallLimit(log *zap.Logger, onLimit func(int)) (*callimit.Limiter, error) {
	l, err := callimit.New(callimit.Options{Max: p.MaxInFlight, Fixed: !p.AdaptiveConcurrency, Logger: log, OnLimit: onLimit})
	if err != nil {
		return nil, fmt.Errorf("--max-in-flight: %w", err)
	}
	return l, nil
}

// BreakerOff reports whether --breaker-failures turned the circuit breaker
// off.
func (p *Processing) BreakerOff() bool { return p.BreakerFailures == 0 }

// BuildBreaker returns the circuit options the section sets.
func (p *Processing) BuildBreaker() circuit.Options {
	return circuit.Options{Off: p.BreakerOff(), ConsecutiveFailures: uint32(min(max(p.BreakerFailures, 0), math.MaxUint32)),
		FailureRatio: p.BreakerRatio, OpenTimeout: p.BreakerOpen}
}

// offInt is an int flag that also reads "off" as 0, and shows 0 as off:
// --print-config writes what an operator would type.
type offInt struct{ p *int }

func (f offInt) String() string {
	switch {
	case f.p == nil:
		return ""
	case *f.p == 0:
		return "off"
	}
	return strconv.Itoa(*f.p)
}

func (f offInt) Set(s string) error {
	if strings.EqualFold(s, "off") {
		*f.p = 0
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("want a number or off")
	}
	*f.p = n
	return nil
}

// BuildBridge returns the bridge options the section sets.
func (p *Processing) BuildBridge() bridge.Options {
	return bridge.Options{RecordAttempts: p.RecordAttempts, RetryBackoff: p.RecordBackoff, UnrecognisedHold: p.UnrecognisedHold,
		Enrich: p.Enrich, IncludeOriginal: p.IncludeOriginal, RefundKeyCheck: p.RefundKeyCheck}
}

// Delivery is the output guarantee: at-least-once, or exactly-once with
// Kafka transactions.
type Delivery struct {
	Mode               pipeline.Delivery
	TransactionalID    string // "" until Validate with exactly-once: then loyalty-bridge-<hostname>
	TransactionTimeout time.Duration
	// TransactionRecords bounds a round (pipeline.Options.RoundRecords);
	// 0 is the pipeline's default.
	TransactionRecords int
	// TransactionTime is how long a round should take
	// (pipeline.Options.RoundTime).
	TransactionTime time.Duration

	mode *choice[pipeline.Delivery]
}

// Define defines the section's flags on b's flag set and binds them.
func (d *Delivery) Define(b *flagenv.Binder) {
	fs := b.FlagSet()
	d.mode = defineChoice(fs, &d.Mode, "delivery", pipeline.AtLeastOnce, pipeline.ParseDelivery,
		"at-least-once, or exactly-once: outputs and input offsets commit in one Kafka transaction (readers of the reply topics then use isolation.level=read_committed)")
	fs.StringVar(&d.TransactionalID, "transactional-id", "", "exactly-once: this member's transactional id, unique per live member and kept across its restarts (default loyalty-bridge-<hostname>, the pod name in Kubernetes)")
	fs.DurationVar(&d.TransactionTimeout, "transaction-timeout", pipeline.DefaultTransactionTimeout, "exactly-once: bound on one transaction")
	fs.DurationVar(&d.TransactionTime, "transaction-time", pipeline.DefaultRoundTime, "exactly-once: how long one transaction should take: the first takes at most 2 × --max-in-flight records, each after it at most what the last one answered in this time, never more than --transaction-records (a slow partner makes transactions smaller, not longer, so results are not held back and a stop's drain can finish one)")
	fs.IntVar(&d.TransactionRecords, "transaction-records", 0, fmt.Sprintf("exactly-once: records one transaction answers at most; their results are published when the last of them is done (0: %d × --max-in-flight, at most --max-buffered)", pipeline.DefaultRoundsPerInFlight))
}

// Validate reports every problem of the section and fills the default
// transactional id.
func (d *Delivery) Validate() error {
	var errs []error
	if err := d.mode.check("delivery"); err != nil {
		errs = append(errs, err)
	} else if d.Mode == pipeline.ExactlyOnce && d.TransactionalID == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			errs = append(errs, errors.New("--transactional-id: required with --delivery exactly-once (the hostname is unknown)"))
		} else {
			d.TransactionalID = "loyalty-bridge-" + host
		}
	}
	if d.TransactionTimeout < time.Second {
		errs = append(errs, fmt.Errorf("--transaction-timeout %s: must be at least 1s", d.TransactionTimeout))
	}
	if d.TransactionRecords < 0 {
		errs = append(errs, fmt.Errorf("--transaction-records %d: must not be negative", d.TransactionRecords))
	}
	if d.TransactionTime < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("--transaction-time %s: must be at least 10ms", d.TransactionTime))
	}
	return errors.Join(errs...)
}

// Apply sets the section's pipeline options on o.
func (d *Delivery) Apply(o *pipeline.Options) {
	o.Delivery, o.TransactionalID, o.TransactionTimeout = d.Mode, d.TransactionalID, d.TransactionTimeout
	if d.Mode == pipeline.ExactlyOnce {
		o.RoundRecords, o.RoundTime = d.TransactionRecords, d.TransactionTime
	}
}

// Ops is how the process is observed: metrics address, logs, and the
// bounds of start-up and lag measurement.
type Ops struct {
	MetricsAddr    string
	LogFormat      string
	LogLevel       string
	StartupTimeout time.Duration
	LagInterval    time.Duration

	defaultLogLevel string // "": info
}

// Define defines the section's flags on b's flag set and binds them.
func (o *Ops) Define(b *flagenv.Binder) {
	fs := b.FlagSet()
	fs.StringVar(&o.MetricsAddr, "metrics-addr", telemetry.DefaultAddr,
		"address of /metrics, /healthz and /readyz (empty: off). The default listens on every interface, for Prometheus and the kubelet outside the pod: whoever reaches the port reads the metrics; outside a container, use "+telemetry.LoopbackAddr)
	fs.StringVar(&o.LogFormat, "log-format", "json", "json or console")
	level := "info"
	if o.defaultLogLevel != "" {
		level = o.defaultLogLevel
	}
	fs.StringVar(&o.LogLevel, "log-level", level, "debug, info, warn or error")
	fs.DurationVar(&o.StartupTimeout, "startup-timeout", 30*time.Second, "bound on start-up checks (brokers, registry, first token)")
	fs.DurationVar(&o.LagInterval, "lag-interval", 15*time.Second, "how often consumer lag is measured for metrics")
}

// Validate reports every problem of the section, each naming its flag.
func (o *Ops) Validate() error {
	var errs []error
	if o.LogFormat != "json" && o.LogFormat != "console" {
		errs = append(errs, fmt.Errorf("--log-format %q: want json or console", o.LogFormat))
	}
	switch o.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("--log-level %q: want debug, info, warn or error", o.LogLevel))
	}
	if o.StartupTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--startup-timeout %s: must be positive", o.StartupTimeout))
	}
	if o.LagInterval <= 0 {
		errs = append(errs, fmt.Errorf("--lag-interval %s: must be positive", o.LagInterval))
	}
	return errors.Join(errs...)
}

// Build returns the logger the section describes, writing to w (nil:
// stderr).
func (o *Ops) Build(w io.Writer) (*zap.Logger, error) {
	return telemetry.NewLogger(telemetry.LogOptions{Format: o.LogFormat, Level: o.LogLevel, Output: w})
}
