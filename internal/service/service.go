package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/plugin/kprom"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/loyalty-bridge/loyalty-bridge/internal/authhold"
	"github.com/loyalty-bridge/loyalty-bridge/internal/bridge"
	"github.com/loyalty-bridge/loyalty-bridge/internal/circuit"
	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/ledger"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/parking"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
	"github.com/loyalty-bridge/loyalty-bridge/internal/signing"
	"github.com/loyalty-bridge/loyalty-bridge/internal/telemetry"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tracing/provider"
)

// Options are what a caller other than `run` adds to a Config: the dev
// command and tests pass their own logger and listener.
type Options struct {
	// Logger; nil builds one from the config's --log-format and --log-level
	// writing to LogOutput.
	Logger *zap.Logger
	// LogOutput is where that logger writes (nil: stderr): a command
	// passes the stderr it was given.
	LogOutput io.Writer
	// MetricsListener, when set, serves /metrics, /healthz and /readyz
	// instead of listening on --metrics-addr.
	MetricsListener net.Listener
	// Observer also receives the pipeline's events (the dev command's
	// progress display); the service's metrics get them in any case.
	Observer pipeline.Observer
	// ClientOpts are added to every Kafka client (tests: fast heartbeats).
	ClientOpts []kgo.Opt
	// NoAPI connects Kafka and the registry only: no partner API client,
	// token or breaker (a dry run calls nothing). Deps.Bridge then fails.
	NoAPI bool
	// Warnings found while reading the configuration (flagenv's), logged
	// once the logger exists.
	Warnings []string
	// TraceOutput is where --tracing stdout writes its spans (nil:
	// os.Stdout): the dev command passes its own stdout.
	TraceOutput io.Writer
}

// Deps are the connected parts every bridge-running command shares: the
// live service, replay and the dev command. Connect builds them; Close
// releases them.
type Deps struct {
	Config    *config.Config
	Log       *zap.Logger
	Metrics   *telemetry.Metrics
	Health    *telemetry.Health
	KafkaOpts []kgo.Opt // connection options (seeds, TLS, SASL, logger, Options.ClientOpts)
	Registry  *sr.Client
	Codec     *codec.Codec
	Client    *loyalty.Client
	Tokens    *tokensource.Cache
	Breaker   *circuit.Breaker
	Hold      *authhold.Hold  // holds records while the partner refuses the credentials
	Signer    *signing.Signer // nil without --partner-key
	Ledger    *ledger.Ledger  // nil with --ledger=false
	// Tracing is the tracer provider; nil with --tracing off (package
	// tracing/provider: a nil Provider traces nothing).
	Tracing *provider.Provider

	admin    *kgo.Client
	ledgerCl *kgo.Client
	api      *config.APIClient
	retries  retryWatch // for WaitingFor
}

// Service is a configured, connected bridge. New checks every dependency;
// Run consumes until its context ends.
type Service struct {
	*Deps
	cfg    *config.Config
	log    *zap.Logger
	bridge *bridge.Bridge
	pipe   *pipeline.Pipeline
	lnMu   sync.Mutex // guards ln: Run takes it to serve, Close to close
	ln     net.Listener
	// metricsAddr is ln's address, kept after Run hands ln to the server
	// (which it takes out of s.ln, so that a second Run cannot serve it).
	metricsAddr string
	joined      atomic.Bool
	owner       *metricsObserver // which partitions this member owns
}

// Connect connects everything a bridge needs, in the order an operator
// would check by hand: the brokers and input topics (a wrong address, TLS
// or SASL setting fails here, not in a reconnect loop), the registry
// (schemas registered or looked up), and the partner API's identity
// provider (refused credentials fail; an unreachable one only warns, since
// the circuit holds records until the API answers). cfg must be validated.
func Connect(ctx context.Context, cfg *config.Config, o Options) (_ *Deps, err error) {
	d := &Deps{Config: cfg, Log: o.Logger}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	if d.Log == nil {
		if d.Log, err = cfg.Ops.Build(o.LogOutput); err != nil {
			return nil, err
		}
	}
	for _, w := range o.Warnings {
		d.Log.Warn(w)
	}
	d.Metrics = telemetry.NewMetrics()
	d.Health = telemetry.NewHealth(telemetry.HealthOptions{Logger: d.Log.Named("health")})
	ctx, cancel := context.WithTimeout(ctx, cfg.Ops.StartupTimeout)
	defer cancel()

	if d.KafkaOpts, err = cfg.Kafka.BuildLogged(d.Log.Named("kafka")); err != nil {
		return nil, err
	}
	d.KafkaOpts = append(d.KafkaOpts, kgo.WithLogger(kafkaLogger{d.Log.Named("kafka")}))
	d.KafkaOpts = append(d.KafkaOpts, o.ClientOpts...)
	if err := d.checkKafka(ctx); err != nil {
		return nil, err
	}

	if d.Registry, err = cfg.Registry.BuildLogged(d.Log.Named("registry")); err != nil {
		return nil, err
	}
	if d.Codec, err = codec.New(ctx, codec.Options{Registry: d.Registry, Topics: cfg.Topics.Build(), Register: cfg.RegisterSchemas}); err != nil {
		return nil, fmt.Errorf("schema registry %s: %w", config.RedactURL(cfg.Registry.URL), err)
	}
	if o.NoAPI {
		return d, nil
	}
	to := cfg.Tracing.Build()
	to.Stdout = o.TraceOutput
	if d.Tracing, err = provider.New(ctx, to); err != nil {
		return nil, fmt.Errorf("--tracing: %w", err)
	}
	if d.Tracing != nil {
		d.Metrics.Exemplars = true
		d.Log.Info("tracing records", zap.String("exporter", string(to.Exporter)), zap.Float64("sample_ratio", to.SampleRatio))
	}
	if err := d.buildLedger(ctx); err != nil {
		return nil, err
	}
	if err := d.buildClient(ctx); err != nil {
		return nil, err
	}
	bo := cfg.Processing.BuildBreaker()
	bo.IsFailure, bo.Logger = loyalty.IsAPIFailure, d.Log.Named("circuit")
	bo.OnStateChange = func(_, to circuit.State) { d.Metrics.CircuitState.Set(float64(to)) }
	if d.Breaker, err = circuit.New(bo); err != nil {
		return nil, fmt.Errorf("circuit breaker: %w", err)
	}
	// A held record probes no more often than a closed circuit would after
	// an outage: one source for "how long held records wait between tries".
	if d.Hold, err = authhold.New(authhold.Options{Tokens: d.Tokens, MaxBackoff: cfg.Processing.BreakerOpen,
		OnRefused: d.Metrics.AuthFailures.Inc,
		OnChange: func(held bool) {
			v := 0.0
			if held {
				v = 1
			}
			d.Metrics.AuthHeld.Set(v)
		},
		Logger: d.Log.Named("auth")}); err != nil {
		return nil, fmt.Errorf("auth hold: %w", err)
	}
	return d, nil
}

// Bridge returns the bridge's record handler over these parts. replay
// guards every accrual and redemption and marks outputs replayed.
func (d *Deps) Bridge(replay bool) (*bridge.Bridge, error) {
	if d.Client == nil {
		return nil, errors.New("service: connected without the partner API")
	}
	cfg := d.Config
	if cfg.Processing.IncludeOriginal {
		d.Log.Warn("--include-original: error events carry their original records, personal data included, readable by every reader of the error topics")
	}
	o := cfg.Processing.BuildBridge()
	o.Client, o.Codec, o.Topics, o.Breaker, o.Hold, o.Signer = d.Client, d.Codec, cfg.Topics.Build(), d.Breaker, d.Hold, d.Signer
	o.Replay, o.Metrics, o.Logger, o.Profile = replay, d.Metrics, d.Log.Named("bridge"), cfg.Partner.Build()
	o.Ledger, o.CallTimeout, o.Tracer = d.Ledger, cfg.API.Timeout, d.Tracing.Tracer()
	if d.parks(replay) {
		o.ParkedTopic, o.OriginalWait, o.ParkBackoff = cfg.Parking.Topic, cfg.Parking.OriginalWait, cfg.Parking.Backoff
	}
	return bridge.New(o)
}

// New connects (see Connect) and builds the live bridge: the consumer
// group pipeline with the bridge's handlers, gated by the circuit breaker
// and the auth hold.
func New(ctx context.Context, cfg *config.Config, o Options) (_ *Service, err error) {
	d, err := Connect(ctx, cfg, o)
	if err != nil {
		return nil, err
	}
	s := &Service{Deps: d, cfg: cfg, log: d.Log, ln: o.MetricsListener}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if d.parks(false) {
		if err := d.ensureParked(ctx); err != nil {
			return nil, err
		}
	}
	if s.bridge, err = d.Bridge(false); err != nil {
		return nil, err
	}
	kp := kprom.NewMetrics("loyalty_bridge_kafka", kprom.Registerer(d.Metrics.Registry), kprom.Gatherer(d.Metrics.Registry))
	s.owner = &metricsObserver{m: d.Metrics, joined: &s.joined, inputs: cfg.Topics.Build().Inputs(), covered: make(chan struct{})}
	obs := observers{s.owner}
	if d.Ledger != nil {
		obs = append(obs, ledgerObserver{l: d.Ledger})
	}
	if o.Observer != nil {
		obs = append(obs, o.Observer)
	}
	po := cfg.Pipeline()
	po.Topics = s.bridge.Inputs() // the input topics and the parked topic
	// Records of upstream transactions that aborted are not events.
	po.ClientOpts = append(append([]kgo.Opt(nil), d.KafkaOpts...), kgo.WithHooks(kp), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	// Receive and publish spans of the records (none with tracing off).
	po.ClientOpts = append(po.ClientOpts, d.Tracing.KafkaOpts(cfg.Group.Name)...)
	po.Handler, po.Fallback, po.Gate, po.Observer, po.Logger = s.bridge.Handle, s.bridge.Fallback, d.Gate(), obs, d.Log.Named("pipeline")
	if d.Ledger != nil {
		po.Salvage = salvageSettled(d.Ledger)
	}
	s.pipe, err = pipeline.New(po)
	if err != nil {
		return nil, err
	}
	d.Health.Check("group", func(context.Context) error {
		if !s.joined.Load() {
			return errors.New("not yet assigned partitions by the consumer group")
		}
		return nil
	})
	// The token cache's state, not a grant: a probe that logs in would
	// retry a rotated password on every probe and could lock the account.
	d.Health.Check("token", func(context.Context) error { return d.Tokens.Health() })
	// A grant that succeeds does not prove the API takes its tokens: the
	// hold knows when it refuses them.
	d.Health.Check("credentials", func(context.Context) error { return d.Hold.Health() })
	// Records held on partner answers the profile does not name wait for
	// someone to fix the profile: not ready, as for refused credentials.
	d.Health.Check("partner-answers", func(context.Context) error { return s.bridge.Health() })
	// Shared: every probe would otherwise be a registry request.
	d.Health.Check("registry", telemetry.Shared(func(ctx context.Context) error {
		_, err := d.Registry.Subjects(ctx)
		return err
	}, telemetry.ShareOptions{}))
	if s.ln == nil && cfg.Ops.MetricsAddr != "" {
		if s.ln, err = net.Listen("tcp", cfg.Ops.MetricsAddr); err != nil {
			return nil, fmt.Errorf("--metrics-addr: %w", err)
		}
	}
	if s.ln != nil {
		s.metricsAddr = s.ln.Addr().String()
	}
	return s, nil
}

// Gate is what holds the pipeline's dispatch: the circuit breaker while
// the API is down, then the auth hold while the credentials are refused.
func (d *Deps) Gate() pipeline.Gate { return gates{d.Breaker, d.Hold} }

type gates []pipeline.Gate

func (gs gates) Ready(ctx context.Context) error {
	for _, g := range gs {
		if err := g.Ready(ctx); err != nil {
			return err
		}
	}
	return nil
}

// buildLedger opens the transaction ledger (--ledger): its topic is
// created when missing, or checked (partitions, compaction, retention);
// every client of d's then partitions it by input partition, so that the
// pipeline's and replay's producers write settled entries where the
// ledger reads them.
func (d *Deps) buildLedger(ctx context.Context) error {
	lc := d.Config.Ledger
	if !lc.On {
		return nil
	}
	d.KafkaOpts = append(d.KafkaOpts, kgo.RecordPartitioner(ledger.Partitioner(lc.Topic)))
	// An intent is waited for before its write is sent, so it lingers
	// little; but not 0: with no linger each intent went in a produce
	// request of its own (a CPU profile of loyalty-bench at 256 in flight:
	// 13% of the bridge's CPU in write syscalls).
	cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), d.KafkaOpts...), kgo.ProducerLinger(time.Millisecond))...)
	if err != nil {
		return fmt.Errorf("ledger client: %w", err)
	}
	d.ledgerCl = cl
	inputs := d.Config.Topics.Build().Inputs()
	created, err := ledger.Ensure(ctx, cl, lc.Topic, inputs, lc.Window, int16(lc.ReplicationFactor))
	if err != nil {
		return fmt.Errorf("--ledger-topic: %w", err)
	}
	if created {
		d.Log.Info("ledger topic created", zap.String("topic", lc.Topic), zap.Duration("dedup_window", lc.Window))
	}
	d.Ledger, err = ledger.New(ledger.Options{Client: cl, ReaderOpts: d.KafkaOpts, Topic: lc.Topic, Window: lc.Window,
		Dir: lc.Dir, Logger: d.Log})
	if err != nil && lc.Dir != "" {
		return fmt.Errorf("--ledger-dir %s: %w", lc.Dir, err)
	}
	if err != nil {
		return err
	}
	if lc.Dir != "" {
		d.Log.Info("ledger kept on disk", zap.String("dir", lc.Dir))
	}
	return nil
}

// salvageSettled is the pipeline's Salvage with the transaction ledger:
// of an aborted exactly-once round's outputs, the ledger's settled
// entries are written outside the transaction (the partner calls they
// settle happened), so that the records, run again, are answered from
// them instead of waiting for those calls to settle.
func salvageSettled(l *ledger.Ledger) func(context.Context, []*kgo.Record) error {
	return func(ctx context.Context, outs []*kgo.Record) error {
		var settled []*kgo.Record
		for _, r := range outs {
			if r.Topic == l.Topic() {
				settled = append(settled, r)
			}
		}
		if len(settled) == 0 {
			return nil
		}
		return l.WriteSettled(ctx, settled)
	}
}

// parks reports whether refunds whose purchase is not found yet are
// parked. Not by a replay: it runs outside the group, which would never
// bring a parked refund back to it. Not in exactly-once mode: a round
// waits for its slowest record, so a parked refund waiting to be due
// would hold every partition's round. Those answer such a refund at once,
// a BUSINESS error ORIGINAL_NOT_FOUND that is retryable.
func (d *Deps) parks(replay bool) bool {
	return !replay && d.Config.Delivery.Mode == pipeline.AtLeastOnce
}

// ensureParked creates the parked topic (--parked-topic) when missing, or
// checks it (not compacted, kept long enough), before the live bridge
// consumes it.
func (d *Deps) ensureParked(ctx context.Context) error {
	pc := d.Config.Parking
	ctx, cancel := context.WithTimeout(ctx, d.Config.Ops.StartupTimeout)
	defer cancel()
	created, err := parking.Ensure(ctx, d.admin, pc.Topic, d.Config.Topics.RefundRedemption, pc.OriginalWait, int16(pc.ReplicationFactor))
	if err != nil {
		return fmt.Errorf("--parked-topic: %w", err)
	}
	if created {
		d.Log.Info("parked topic created", zap.String("topic", pc.Topic), zap.Duration("original_wait", pc.OriginalWait))
	}
	return nil
}

// buildClient builds the partner API client stack (see config.API.Build)
// and fetches a first token.
func (d *Deps) buildClient(ctx context.Context) error {
	cfg := d.Config
	calls, err := cfg.Processing.BuildCallLimit(d.Log.Named("callimit"), func(n int) { d.Metrics.ConcurrencyLimit.Set(float64(n)) })
	if err != nil {
		return err
	}
	api, err := cfg.API.Build(config.BuildOptions{Logger: d.Log, MaxConns: cfg.Processing.MaxInFlight,
		Calls: calls, OnCalls: func(n int) { d.Metrics.APICallsInFlight.Set(float64(n)) },
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
			return d.Metrics.InstrumentTransport(d.retries.observe(rt))
		},
		OnGrant: d.Metrics.TokenGrant,
		OnRetry: func(endpoint string) { d.Metrics.APIRetries.WithLabelValues(endpoint).Inc() },
		Wait:    d.retries.wait(pipeline.Wait), Profile: cfg.Partner.Build(),
		WriteGate: pipeline.LeaseGate{}, Tracer: d.Tracing.Tracer()})
	if err != nil {
		return err
	}
	d.api = api
	d.Client, d.Tokens, d.Signer = api.Client, api.Tokens, api.Signer
	// The first token: refused credentials are a configuration error to
	// report now; an unreachable identity provider is an outage the
	// circuit rides out.
	if _, err := d.Tokens.Token(ctx); err != nil {
		if tokensource.IsTransient(err) {
			d.Log.Warn("partner identity provider unreachable at start-up; records wait for it", zap.Error(err))
			return nil
		}
		return fmt.Errorf("partner API credentials (--client-id, --client-secret, --username, --password or --partner-key): %w", err)
	}
	return nil
}

// checkKafka connects once with the service's settings and checks that the
// input topics exist, so a bad address, TLS setting or SASL credential is a
// start-up error rather than an endless reconnect loop.
func (d *Deps) checkKafka(ctx context.Context) error {
	cl, err := kgo.NewClient(d.KafkaOpts...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	d.admin = cl
	adm := kadm.NewClient(cl)
	topics, err := adm.ListTopics(ctx, d.Config.Topics.Build().Inputs()...)
	if err != nil {
		return d.Config.Kafka.ConnectError(err)
	}
	var missing []string
	for _, t := range d.Config.Topics.Build().Inputs() {
		if d, ok := topics[t]; !ok || d.Err != nil {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("kafka: input topics %v do not exist (create them, with their .result and .error topics)", missing)
	}
	return nil
}

// Covered is closed once this member has been assigned partitions of every
// input topic: start-up is over (dev prints its banner then, so that it is
// not pushed off the screen by start-up lines).
func (s *Service) Covered() <-chan struct{} { return s.owner.covered }

// MetricsAddr is the address /metrics is served on, or "".
// It stays the same once Run serves it.
func (s *Service) MetricsAddr() string { return s.metricsAddr }

// Run consumes until ctx ends, then shuts down gracefully: stop fetching,
// drain in flight (bounded by --drain-timeout), produce, commit, leave the
// group. It returns nil after a clean shutdown.
func (s *Service) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	var stop sync.Once
	pipeCtx, cancelPipe := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelPipe()
	// The pipeline gets its own context so that a failing side task (the
	// metrics server) stops it through the same graceful path as a signal.
	g.Go(func() error {
		<-gctx.Done()
		stop.Do(cancelPipe)
		return nil
	})
	g.Go(func() error {
		defer stop.Do(cancelPipe)
		err := s.pipe.Run(pipeCtx)
		if err != nil {
			return fmt.Errorf("bridge: %w", err)
		}
		return nil
	})
	if ln := s.takeListener(); ln != nil {
		g.Go(func() error {
			if err := telemetry.ServeListener(pipeCtx, ln, telemetry.Handler(s.Metrics, s.Health)); err != nil {
				return fmt.Errorf("metrics server: %w", err)
			}
			return nil
		})
	}
	g.Go(func() error {
		s.measureLag(pipeCtx)
		return nil
	})
	s.log.Info("bridge running", zap.String("group", s.cfg.Group.Name), zap.Strings("topics", s.cfg.Topics.Build().Inputs()),
		zap.Stringer("ordering", s.cfg.Processing.Ordering), zap.Int("max_in_flight", s.cfg.Processing.MaxInFlight),
		zap.Bool("adaptive_concurrency", s.cfg.Processing.AdaptiveConcurrency))
	err := g.Wait()
	s.log.Info("bridge stopped", zap.Error(err))
	return err
}

// measureLag refreshes the lag gauges of the partitions this member owns
// every --lag-interval.
func (s *Service) measureLag(ctx context.Context) {
	adm := kadm.NewClient(s.admin)
	t := time.NewTicker(s.cfg.Ops.LagInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		lctx, cancel := context.WithTimeout(ctx, s.cfg.Ops.LagInterval)
		lags, err := adm.Lag(lctx, s.cfg.Group.Name)
		cancel()
		if err != nil {
			s.log.Debug("measuring lag", zap.Error(err))
			continue
		}
		for _, gl := range lags {
			for topic, parts := range gl.Lag {
				for p, l := range parts {
					if l.Err == nil && s.owner.owns(topic, p) {
						committed := l.Commit.At
						if committed < 0 { // nothing committed yet: consumption starts at the log start
							committed = l.End.Offset - l.Lag
						}
						s.Metrics.SetOffsets(topic, p, committed, l.End.Offset)
					}
				}
			}
		}
	}
}

// Close releases what Connect opened.
func (d *Deps) Close() {
	if d.Tracing != nil {
		// The spans still batched: a collector that is down costs them,
		// never more than this.
		ctx, cancel := context.WithTimeout(context.Background(), tracingFlushTimeout)
		if err := d.Tracing.Shutdown(ctx); err != nil {
			d.Log.Warn("tracing: spans not flushed", zap.Error(err))
		}
		cancel()
	}
	// The ledger's disk store is closed cleanly (the pipeline has
	// stopped: Run returned), before the client it reads with.
	if d.Ledger != nil {
		if err := d.Ledger.Close(); err != nil {
			d.Log.Warn("ledger: close", zap.Error(err))
		}
	}
	if d.api != nil {
		d.api.Close()
	}
	if d.admin != nil {
		d.admin.Close()
	}
	if d.ledgerCl != nil {
		d.ledgerCl.Close()
	}
}

// tracingFlushTimeout bounds how long Close waits for the last spans.
const tracingFlushTimeout = 5 * time.Second

// Close releases what New opened. Run does not call it; the caller does,
// after Run returns (the clients Run uses are closed here). A Close while
// Run still starts is no data race on the metrics listener: one of them
// takes it.
func (s *Service) Close() {
	if ln := s.takeListener(); ln != nil {
		_ = ln.Close()
	}
	s.Deps.Close()
}

// takeListener returns the metrics listener not yet served or closed, and
// leaves nil in its place.
func (s *Service) takeListener() net.Listener {
	s.lnMu.Lock()
	defer s.lnMu.Unlock()
	ln := s.ln
	s.ln = nil
	return ln
}
