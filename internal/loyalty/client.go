package loyalty

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/apiendpoint"
	"github.com/loyalty-bridge/loyalty-bridge/internal/callimit"
	"github.com/loyalty-bridge/loyalty-bridge/internal/noredirect"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/signing"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
)

// RetryPolicy bounds the client's retries. Zero fields take the defaults.
type RetryPolicy struct {
	MaxAttempts   int           // attempts in all, first included (default 4; 1 = never retry)
	Initial       time.Duration // first back-off ceiling (default 100 ms)
	Max           time.Duration // back-off ceiling (default 5 s)
	MaxElapsed    time.Duration // no retry starts after this much time since the call began (default 30 s)
	MaxRetryAfter time.Duration // cap on a server's Retry-After (default 30 s)
}

// Defaults of RetryPolicy and Options.
const (
	DefaultMaxAttempts   = 4
	DefaultInitial       = 100 * time.Millisecond
	DefaultMaxBackoff    = 5 * time.Second
	DefaultMaxElapsed    = 30 * time.Second
	DefaultMaxRetryAfter = 30 * time.Second
	DefaultTimeout       = 10 * time.Second
	// DefaultMaxResponseBytes bounds the body of one answer (Options.
	// MaxResponseBytes). The spec's answers are under 1 KB; a gateway's
	// error page may be far larger, and every attempt in flight holds its
	// body: 256 attempts at 64 KiB are 16 MiB.
	DefaultMaxResponseBytes = 64 << 10
	// MaxResponseBytesLimit is the largest Options.MaxResponseBytes New
	// accepts: 256 attempts in flight at 1 MiB are already half of a
	// 512 MiB container.
	MaxResponseBytesLimit = 1 << 20
)

// ErrResponseTooLarge is the cause of a *MalformedResponseError whose
// answer's body was over Options.MaxResponseBytes.
var ErrResponseTooLarge = errors.New("answer body over the size limit")

// RedemptionSigner makes the redemption `sign` (a *signing.Signer does).
type RedemptionSigner interface {
	RedemptionSign(signing.Redemption) (string, error)
}

// Options configures New. BaseURL and Tokens are required.
type Options struct {
	// BaseURL is {base_url}, e.g. https://loyalty.example.com.
	BaseURL string
	// Tokens supplies access tokens; share one tokensource.Cache.
	Tokens tokensource.Source
	// HTTPClient is shared by every call. nil: one is built with
	// NewHTTPClient(MaxConns, TLS) and closed by Close.
	HTTPClient *http.Client
	MaxConns   int        // see TransportOptions (used only when HTTPClient is nil)
	TLS        TLSOptions // used only when HTTPClient is nil
	// Timeout bounds one attempt, from sending to the end of the body
	// (default 10 s).
	Timeout time.Duration
	// MaxResponseBytes bounds the body of one answer, whatever its status
	// (default DefaultMaxResponseBytes, at most MaxResponseBytesLimit). A
	// longer body is a *MalformedResponseError (ErrResponseTooLarge): no
	// more of it is read than the limit and a byte, none when its
	// Content-Length says it is over, and its connection is dropped.
	MaxResponseBytes int
	Retry            RetryPolicy
	// Signer signs redemptions that arrive without a sign.
	Signer RedemptionSigner
	// Profile is the partner profile's wire: how the accrual and
	// redemption transactionDates travel, whether an unset idNumber or
	// passportNumber is left out or sent as null, and what a fractional
	// point value in an answer means. Zero value: the simulator's.
	Profile partnerprofile.Profile
	// AccrualDateFormat, when set, is the accrual date format instead of
	// the Profile's (the setting before the profile).
	AccrualDateFormat DateFormat
	// FractionalPoints, when set, replaces the Profile's (the setting
	// before the profile).
	FractionalPoints partnerprofile.Fractions
	Logger           *zap.Logger // default no-op; retries are logged at debug
	// OnRetry, when set, is called before each retry with the endpoint name
	// (e.g. for a retries metric).
	OnRetry func(endpoint string)
	// MaxCalls, when positive, bounds the requests in progress at once
	// across every caller of the Client. A slot is held for one attempt,
	// from before its request until its answer is read: never while a
	// call waits to retry (back-off, Retry-After) or for a token, so a
	// record waiting out a 503 does not keep another from the partner. The
	// wait for a slot is not part of the attempt's Timeout. Token grants
	// are not Client calls and take none. 0: no bound of the Client's own.
	// Ignored when Calls is set.
	MaxCalls int
	// Calls, when set, bounds the requests in progress instead of a fixed
	// MaxCalls, with the same slot rules: an adaptive limit
	// (callimit.Limiter), told what each attempt's answer said about the
	// partner's load (see the package doc, Concurrency).
	Calls *callimit.Limiter
	// OnCalls, when set, is told the attempts holding a slot whenever the
	// number changes (a gauge).
	OnCalls func(inUse int)
	// WriteGate, when set, holds each attempt of a write until it may be
	// sent: the attempt waits for it before it takes a slot, and checks it
	// again without waiting once the slot is held, just before its Timeout
	// starts; it fails as a transient error that sent nothing if the gate
	// returns an error. The bridge passes pipeline.LeaseGate: a write
	// starts only while the member's group membership outlasts the attempt.
	WriteGate WriteGate
	// Tracer, when set, makes a span of each HTTP attempt ("partner
	// <endpoint>": endpoint, attempt number, method, status or failure
	// kind, and the back-off before the next attempt), a child of the
	// caller's context's span. nil: none, at no cost (tracing off).
	Tracer trace.Tracer

	// Test hooks. Sleep waits d or until ctx ends (default a timer); Rand
	// returns a float in [0,1) for jitter (default math/rand/v2); Now is the
	// clock for MaxElapsed (default time.Now).
	Sleep func(ctx context.Context, d time.Duration) error
	Rand  func() float64
	Now   func() time.Time
}

// CallInfo is what the bridge needs to know about a call besides its value.
type CallInfo struct {
	// Attempts is the number of HTTP requests made for the call (0 when it
	// was refused before any; a 401 renewal counts as an attempt).
	Attempts int
	// Ambiguous is true when the call failed but a write may have been
	// applied (see the package doc). Always false on success, for reads and
	// for errors known not to have been applied.
	Ambiguous bool
	// Status is the last HTTP status received, 0 if none.
	Status int
}

// Client calls the partner API. Safe for concurrent use; build one per
// process.
type Client struct {
	base    string
	tokens  tokensource.Source
	hc      *http.Client
	ownHC   bool
	timeout time.Duration
	maxBody int // Options.MaxResponseBytes
	retry   RetryPolicy
	signer  RedemptionSigner
	prof    partnerprofile.Profile // AccrualDateFormat and FractionalPoints applied
	frac    partnerprofile.Fractions
	log     *zap.Logger
	onRetry func(string)
	calls   *callimit.Limiter // nil: no bound
	inUse   atomic.Int64
	onCalls func(int)
	sleep   func(context.Context, time.Duration) error
	// gate: Options.WriteGate.
	gate   WriteGate
	tracer trace.Tracer // Options.Tracer; nil: tracing off
	rand   func() float64
	now    func() time.Time
}

// New validates opts (every problem reported together) and returns a
// Client.
func New(opts Options) (*Client, error) {
	var errs []error
	u, err := url.Parse(opts.BaseURL)
	if opts.BaseURL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, errors.New("loyalty: BaseURL must be an absolute http(s) URL"))
	}
	if opts.Tokens == nil {
		errs = append(errs, errors.New("loyalty: Tokens is required"))
	}
	r := opts.Retry
	if r.MaxAttempts < 0 || r.Initial < 0 || r.Max < 0 || r.MaxElapsed < 0 || r.MaxRetryAfter < 0 || opts.Timeout < 0 || opts.MaxCalls < 0 {
		errs = append(errs, errors.New("loyalty: retry settings and Timeout must not be negative"))
	}
	if opts.MaxResponseBytes < 0 || opts.MaxResponseBytes > MaxResponseBytesLimit {
		errs = append(errs, fmt.Errorf("loyalty: MaxResponseBytes %d: want 1 to %d (0: %d)", opts.MaxResponseBytes, MaxResponseBytesLimit, DefaultMaxResponseBytes))
	}
	prof := opts.Profile
	if opts.AccrualDateFormat != "" {
		if _, err := partnerprofile.ParseDateFormat(string(opts.AccrualDateFormat)); err != nil {
			errs = append(errs, fmt.Errorf("loyalty: AccrualDateFormat: %w", err))
		}
		prof.AccrualDateFormat = opts.AccrualDateFormat
	}
	if opts.FractionalPoints != "" {
		if _, err := partnerprofile.ParseFractions(string(opts.FractionalPoints)); err != nil {
			errs = append(errs, fmt.Errorf("loyalty: FractionalPoints: %w", err))
		}
		prof.FractionalPoints = opts.FractionalPoints
	}
	if err := opts.Profile.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("loyalty: Profile: %w", err))
	}
	c := &Client{base: strings.TrimRight(opts.BaseURL, "/"), tokens: opts.Tokens, hc: opts.HTTPClient,
		timeout: opts.Timeout, maxBody: opts.MaxResponseBytes, retry: r, signer: opts.Signer, prof: prof, frac: prof.Fractions(), log: opts.Logger,
		onRetry: opts.OnRetry, onCalls: opts.OnCalls, sleep: opts.Sleep, rand: opts.Rand, now: opts.Now, calls: opts.Calls,
		gate: opts.WriteGate, tracer: opts.Tracer}
	if c.calls == nil && opts.MaxCalls > 0 {
		if c.calls, err = callimit.New(callimit.Options{Max: opts.MaxCalls, Fixed: true}); err != nil {
			errs = append(errs, fmt.Errorf("loyalty: %w", err))
		}
	}
	if c.hc == nil {
		hc, err := NewHTTPClient(TransportOptions{MaxConns: opts.MaxConns, TLS: opts.TLS})
		if err != nil {
			errs = append(errs, fmt.Errorf("loyalty: %w", err))
		}
		c.hc, c.ownHC = hc, true
	}
	// Whatever client was given: a redirect would re-send bodies (personal
	// data, signs) and the bearer token to another host.
	c.hc = noredirect.Client(c.hc)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	if c.maxBody == 0 {
		c.maxBody = DefaultMaxResponseBytes
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.retry.MaxAttempts == 0 {
		c.retry.MaxAttempts = DefaultMaxAttempts
	}
	def(&c.retry.Initial, DefaultInitial)
	def(&c.retry.Max, DefaultMaxBackoff)
	def(&c.retry.MaxElapsed, DefaultMaxElapsed)
	def(&c.retry.MaxRetryAfter, DefaultMaxRetryAfter)
	if c.log == nil {
		c.log = zap.NewNop()
	}
	if c.sleep == nil {
		c.sleep = sleepCtx
	}
	if c.rand == nil {
		c.rand = rand.Float64
	}
	if c.now == nil {
		c.now = time.Now
	}
	return c, nil
}

// Close releases idle connections of a client-built HTTP client. Calls
// in flight are not affected; a shared Options.HTTPClient is left alone.
func (c *Client) Close() {
	if c.ownHC {
		c.hc.CloseIdleConnections()
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// endpoint describes one business call.
type endpoint struct {
	name   string // told to the transport (apiendpoint) and OnRetry; as in the simulator's counters
	method string
	path   string
	write  bool // may change state: never re-sent after an ambiguous failure
}

var (
	epUserProfile    = endpoint{"user-profile", http.MethodGet, "/api-user/partner/v1/user-profile/", false}
	epUserProfileExt = endpoint{"user-profile-ext", http.MethodGet, "/api-user/partner/v1/user-profile-ext/", false}
	epOnboard        = endpoint{"onboard", http.MethodPost, "/api-user/partner/v1/user/onboard", true}
	epLink           = endpoint{"link-member", http.MethodPost, "/api-user/partner/v1/user/link-member", true}
	epUnlink         = endpoint{"unlink-member", http.MethodPost, "/api-user/partner/v1/user/unlink-member", true}
	epRedemption     = endpoint{"point-redemption", http.MethodPost, "/api-point/partner/v1/point-redemption-with-token", true}
	epAccrual        = endpoint{"point-accrual", http.MethodPost, "/api-point/partner/v1/point-accrual", true}
	epLookup         = endpoint{"lookup-transaction", http.MethodPost, "/api-point/partner/v1/lookup-transaction-id", false}
)

// envelope is the success envelope with data of type T; Errors is kept raw
// to spot an error envelope answered with a 2xx.
type envelope[T any] struct {
	StatusCode int             `json:"statusCode"`
	Message    string          `json:"message"`
	Data       *T              `json:"data"`
	Errors     json.RawMessage `json:"errors"`
}

// errorEnvelope is the API's error envelope.
type errorEnvelope struct {
	StatusCode int    `json:"statusCode"`
	Message    string `json:"message"`
	Errors     *struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		ErrorCode string `json:"errorCode"`
		Name      string `json:"name"`
	} `json:"errors"`
	Data *struct {
		ResultURL string `json:"resultUrl"`
	} `json:"data"`
}

// attemptResult is one HTTP exchange.
type attemptResult struct {
	status     int
	retryAfter time.Duration
	body       []byte
	location   string // of a 3xx answer, which is never followed
	overLimit  int    // the Options.MaxResponseBytes the body is over (not read to its end); 0 if it is not
	err        error  // transport error or attempt timeout (body read included)
	wrote      bool   // the whole request reached the connection
}

// call runs ep with retries and decodes the success envelope into T. It is
// the only place where answers are interpreted.
func call[T any](ctx context.Context, c *Client, ep endpoint, pathParam, ref string, body any) (*T, CallInfo, error) {
	var info CallInfo
	target := c.base + ep.path
	if pathParam != "" {
		target += url.PathEscape(pathParam)
	}
	var payload []byte
	if body != nil {
		var err error
		if payload, err = encodeBody(body); err != nil { // json.Marshal's bytes and errors (bodyencode.go)
			return nil, info, &ValidationError{Op: ep.name, Ref: ref, Problems: []string{"body does not encode: " + err.Error()}}
		}
	}
	start := c.now()
	renewed := false // one token renewal after a 401
	retries := 0
	for {
		var span attemptSpan // of the attempt a retry follows, if any
		if err := ctx.Err(); err != nil {
			return nil, info, &TransientError{Op: ep.name, Ref: ref, Status: info.Status, Attempts: info.Attempts, Err: err}
		}
		tok, err := c.tokens.Token(ctx)
		var retryErr *TransientError
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, info, &TransientError{Op: ep.name, Ref: ref, Status: info.Status, Attempts: info.Attempts, Err: ctx.Err()}
		case err != nil && tokensource.IsTransient(err):
			retryErr = &TransientError{Op: ep.name, Ref: ref, Attempts: info.Attempts, Err: err}
		case err != nil:
			var ge *tokensource.Error
			ae := &AuthError{Op: ep.name, Ref: ref, Err: err}
			if errors.As(err, &ge) {
				ae.HTTPStatus, ae.Code = ge.Status, ge.Code
			}
			return nil, info, ae
		default:
			info.Attempts++
			actx, sp := c.startAttempt(ctx, ep, info.Attempts)
			res := c.attempt(actx, ep, target, payload, tok)
			sp.answered(res)
			info.Status = res.status
			done, rerr := c.interpret(ctx, ep, ref, &info, res, tok, &renewed)
			if done {
				sp.end(0)
				if rerr != nil {
					return nil, info, rerr
				}
				return decodeData[T](ep, ref, &info, res)
			}
			if rerr == nil { // 401 with a renewal left: go again at once
				sp.end(0)
				continue
			}
			retryErr, span = rerr, sp
		}
		// A retry known not to repeat an applied write.
		retries++
		retryErr.Attempts = info.Attempts
		if retries >= c.retry.MaxAttempts {
			span.end(0)
			return nil, info, retryErr
		}
		wait := c.backoff(retries)
		if retryErr.RetryAfter > 0 {
			wait = min(retryErr.RetryAfter, c.retry.MaxRetryAfter)
		}
		if c.now().Add(wait).Sub(start) > c.retry.MaxElapsed {
			span.end(0)
			return nil, info, retryErr
		}
		span.end(wait)
		c.log.Debug("retrying partner API call", zap.String("endpoint", ep.name), zap.String("ref", ref),
			zap.Int("attempts", info.Attempts), zap.Int("status", retryErr.Status), zap.Duration("wait", wait),
			zap.NamedError("cause", retryErr.Err))
		if c.onRetry != nil {
			c.onRetry(ep.name)
		}
		if err := c.sleep(ctx, wait); err != nil {
			return nil, info, &TransientError{Op: ep.name, Ref: ref, Status: info.Status, Attempts: info.Attempts, Err: err}
		}
	}
}

// backoff is full jitter: uniform in [0, min(Max, Initial·2^(n−1))).
func (c *Client) backoff(n int) time.Duration {
	ceil := c.retry.Initial << min(n-1, 30)
	if ceil <= 0 || ceil > c.retry.Max {
		ceil = c.retry.Max
	}
	return time.Duration(c.rand() * float64(ceil))
}

// interpret classifies one attempt. done: the call ends here (with rerr or,
// when rerr is nil, a 2xx to decode). Not done with rerr nil: renew the
// token and go again now. Not done with rerr: retry after back-off.
func (c *Client) interpret(ctx context.Context, ep endpoint, ref string, info *CallInfo, res attemptResult,
	tok tokensource.Token, renewed *bool) (bool, *TransientError) {
	te := func(ambiguous bool, err error) *TransientError {
		return &TransientError{Op: ep.name, Ref: ref, Status: res.status, RetryAfter: res.retryAfter,
			Attempts: info.Attempts, Ambiguous: ambiguous, Err: err}
	}
	if res.err == nil && res.overLimit > 0 {
		return true, nil // malformed, whatever the status (decodeData)
	}
	if res.err != nil {
		ambiguous := ep.write && res.wrote
		if errors.Is(res.err, ErrSendLate) { // nothing sent: the caller intends again
			return true, te(false, res.err)
		}
		if ctx.Err() != nil { // the caller gave up: stop, saying what we know
			info.Ambiguous = ambiguous
			return true, te(ambiguous, ctx.Err())
		}
		if ambiguous {
			info.Ambiguous = true
			return true, te(true, res.err)
		}
		return false, te(false, res.err)
	}
	switch s := res.status; {
	case s >= 200 && s < 300:
		return true, nil
	case s == http.StatusUnauthorized:
		if !*renewed {
			*renewed = true
			c.tokens.Invalidate(tok)
			return false, nil
		}
		return true, nil
	case s == http.StatusRequestTimeout, s == http.StatusTooManyRequests, s == http.StatusServiceUnavailable:
		// Refused before processing: safe to send again, writes included.
		return false, te(false, errors.New(http.StatusText(s)))
	case s >= 500:
		if ep.write {
			info.Ambiguous = true
			return true, te(true, errors.New(http.StatusText(s)))
		}
		return false, te(false, errors.New(http.StatusText(s)))
	}
	return true, nil // other 4xx: decoded as business, auth or rejected
}

// decodeData turns a finished attempt into the call's value or typed error.
func decodeData[T any](ep endpoint, ref string, info *CallInfo, res attemptResult) (*T, CallInfo, error) {
	s := res.status
	if res.overLimit > 0 {
		// Ambiguous as the status alone would be (interpret): a write
		// answered 2xx, or 5xx but 503, may have been applied.
		info.Ambiguous = ep.write && (s >= 200 && s < 300 || s >= 500 && s != http.StatusServiceUnavailable)
		return nil, *info, &MalformedResponseError{Op: ep.name, Ref: ref, HTTPStatus: s, Ambiguous: info.Ambiguous,
			Err: fmt.Errorf("%w of %d bytes", ErrResponseTooLarge, res.overLimit)}
	}
	if s >= 200 && s < 300 {
		var env envelope[T]
		var err error
		if !fastDecode(res.body, &env) { // fastdecode.go: the same result, or declined
			err = json.Unmarshal(res.body, &env)
		}
		switch {
		case err == nil && len(env.Errors) > 0 && string(env.Errors) != "null":
			if be := businessError(ep, ref, s, res.body); be != nil {
				return nil, *info, be
			}
			// "errors" is there but not the envelope's object (e.g. []):
			// unreadable, and a write may have been applied.
			info.Ambiguous = ep.write
			return nil, *info, &MalformedResponseError{Op: ep.name, Ref: ref, HTTPStatus: s, Ambiguous: ep.write, Err: errors.New("errors field is not the error envelope's object")}
		case err != nil:
			info.Ambiguous = ep.write
			return nil, *info, &MalformedResponseError{Op: ep.name, Ref: ref, HTTPStatus: s, Ambiguous: ep.write, Err: errors.New("body is not the JSON success envelope")}
		case env.Data == nil:
			return nil, *info, malformed(ep, ref, info, errors.New("success envelope without data"))
		case env.StatusCode != http.StatusOK:
			return nil, *info, malformed(ep, ref, info, fmt.Errorf("success envelope with statusCode %d, not 200", env.StatusCode))
		case env.Message != SuccessMessage:
			// The text is the partner's: not quoted, it could say anything.
			return nil, *info, malformed(ep, ref, info, errors.New("success envelope whose message is not "+SuccessMessage))
		}
		return env.Data, *info, nil
	}
	if noredirect.IsRedirect(s) {
		// Not processed here; the caller must fix the configured URL.
		return nil, *info, &MalformedResponseError{Op: ep.name, Ref: ref, HTTPStatus: s, Err: noredirect.Error(s, res.location)}
	}
	if s == http.StatusUnauthorized || s == http.StatusForbidden {
		ae := &AuthError{Op: ep.name, Ref: ref, HTTPStatus: s}
		var env errorEnvelope
		if json.Unmarshal(res.body, &env) == nil && env.Errors != nil {
			ae.Code = env.Errors.Code
		}
		return nil, *info, ae
	}
	if be := businessError(ep, ref, s, res.body); be != nil {
		return nil, *info, be
	}
	// A 4xx without the envelope: refused in front of the API (or by an API
	// breaking its contract), not applied, and refused again if re-sent.
	return nil, *info, &RejectedError{Op: ep.name, Ref: ref, HTTPStatus: s}
}

// SuccessMessage is the success envelope's message (spec: "SUCCESS on
// success"); any other is a malformed answer.
const SuccessMessage = "SUCCESS"

// malformed is a 2xx answer that cannot be read as the spec says; for a
// write it may have been applied.
func malformed(ep endpoint, ref string, info *CallInfo, err error) *MalformedResponseError {
	info.Ambiguous = ep.write
	return &MalformedResponseError{Op: ep.name, Ref: ref, HTTPStatus: info.Status, Ambiguous: ep.write, Err: err}
}

// businessError is body's error envelope as a *BusinessError, nil when
// body is not the envelope.
func businessError(ep endpoint, ref string, status int, body []byte) *BusinessError {
	var env errorEnvelope
	if err := json.Unmarshal(body, &env); err != nil || env.Errors == nil {
		return nil
	}
	be := &BusinessError{Op: ep.name, Ref: ref, HTTPStatus: status, StatusCode: env.StatusCode,
		StatusMessage: env.Message, Code: env.Errors.Code, Message: env.Errors.Message,
		ErrorCode: env.Errors.ErrorCode, Name: env.Errors.Name}
	if env.Data != nil {
		be.ResultURL = env.Data.ResultURL
	}
	return be
}

// WriteGate decides when a write attempt may be sent (Options.WriteGate).
type WriteGate interface {
	// Wait returns nil once a write may be sent, or an error (ctx's when
	// it ends) if it may not.
	Wait(ctx context.Context) error
	// Allowed reports, without waiting, whether a write may be sent now.
	Allowed(ctx context.Context) bool
}

// attempt makes one HTTP request, bounded by the per-attempt timeout, and
// reads the whole answer unless it is over c.maxBody.
func (c *Client) attempt(ctx context.Context, ep endpoint, target string, payload []byte, tok tokensource.Token) (res attemptResult) {
	gate := c.gate
	if !ep.write {
		gate = nil
	}
	if gate != nil {
		// Before the slot: a write waiting for its gate (a heartbeat) must
		// not hold a slot that reads, and writes already allowed, could
		// use, and its wait is no latency of the partner's.
		if err := gate.Wait(ctx); err != nil {
			return attemptResult{err: transportErr(ctx, ctx, err)}
		}
	}
	if c.calls != nil {
		// Before the attempt's timeout starts: waiting for a slot says
		// nothing about the partner.
		slot, err := c.acquire(ctx, gate)
		if err != nil {
			return attemptResult{err: transportErr(ctx, ctx, err)}
		}
		c.callsChanged(c.inUse.Add(1))
		defer func() {
			c.callsChanged(c.inUse.Add(-1))
			slot.Done(loadSignal(ctx, res))
		}()
	}
	if by, ok := ctx.Value(sendByKey{}).(time.Time); ok && ep.write && c.now().After(by) {
		// After the gate and the slot, the last moment before sending:
		// what the caller promised others about this write's sending
		// (WithSendBy) no longer holds.
		return attemptResult{err: ErrSendLate}
	}
	actx, cancel := context.WithTimeout(apiendpoint.With(ctx, ep.name), c.timeout)
	defer cancel()
	var wrote atomic.Bool
	if ep.write {
		// Whether the request was fully sent decides, after a failure,
		// between "not applied, retry" and "ambiguous, ask the bridge".
		actx = httptrace.WithClientTrace(actx, &httptrace.ClientTrace{
			WroteRequest: func(i httptrace.WroteRequestInfo) {
				if i.Err == nil {
					wrote.Store(true)
				}
			},
		})
	}
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(actx, ep.method, target, rd)
	if err != nil {
		return attemptResult{err: errors.New("cannot build request")}
	}
	req.Header.Set("Accept", "application/json")
	// The spec lists Content-Type as required on every business endpoint,
	// the bodiless GETs included: a gateway that enforces it refuses a GET
	// without one.
	req.Header.Set("Content-Type", "application/json")
	tok.SetAuthHeader(req)
	resp, err := c.hc.Do(req)
	if err != nil {
		return attemptResult{err: transportErr(actx, ctx, err), wrote: wrote.Load()}
	}
	// Closing a body that was not read to its end drops the connection
	// instead of draining it: an over-limit answer costs a new connection,
	// never more reading.
	defer resp.Body.Close()
	res = attemptResult{status: resp.StatusCode, wrote: true, retryAfter: parseRetryAfter(resp.Header.Get("Retry-After"))}
	if noredirect.IsRedirect(resp.StatusCode) {
		res.location = resp.Header.Get("Location")
	}
	if resp.ContentLength > int64(c.maxBody) {
		res.overLimit = c.maxBody
		return res
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(c.maxBody)+1))
	switch {
	case err != nil:
		res.err = transportErr(actx, ctx, err)
	case len(body) > c.maxBody:
		res.overLimit = c.maxBody
	default:
		res.body = body
	}
	return res
}

// acquire takes a call slot. With a gate, the write's gate must still be
// open once the slot is held (the slot may have taken long): if it closed
// meanwhile, the slot goes back, telling the limiter nothing, and the
// write waits for the gate again before it queues anew.
func (c *Client) acquire(ctx context.Context, gate WriteGate) (*callimit.Call, error) {
	for {
		slot, err := c.calls.Acquire(ctx)
		if err != nil || gate == nil || gate.Allowed(ctx) {
			return slot, err
		}
		slot.Done(callimit.Ignore)
		if err := gate.Wait(ctx); err != nil {
			return nil, err
		}
	}
}

// loadSignal is what an attempt's answer says about the partner's load,
// for the call limit: refusals (408, 429, 503, and any answer with a
// Retry-After) and timeouts (the attempt's own, or a gateway's 504) are
// push-backs; other failures (500, a broken connection, a redirect) say
// nothing about load; any other answer, 4xx included, was processed. An
// attempt its caller gave up on is ignored.
func loadSignal(ctx context.Context, res attemptResult) callimit.Signal {
	switch s := res.status; {
	case ctx.Err() != nil:
		return callimit.Ignore
	case errors.Is(res.err, errAttemptTimeout), s == http.StatusGatewayTimeout:
		return callimit.Timeout
	case res.err != nil:
		return callimit.Failure
	case s == http.StatusRequestTimeout, s == http.StatusTooManyRequests, s == http.StatusServiceUnavailable,
		res.retryAfter > 0:
		return callimit.PushBack
	case s >= 500, s >= 300 && s < 400:
		return callimit.Failure
	}
	return callimit.Success
}

func (c *Client) callsChanged(n int64) {
	if c.onCalls != nil {
		c.onCalls(int(n))
	}
}

// sendByKey carries WithSendBy's time in a call's context.
type sendByKey struct{}

// WithSendBy returns ctx for a write call whose attempts must each be sent
// by t: the bridge's transaction ledger tells other processes that a write
// intended at some time leaves within ledger.SendWithin of it, and waits
// for it accordingly, so an attempt that would leave later (its gate or
// call slot waited long, or it is a retry after an answer known not to be
// applied) is not sent. The call then fails with a TransientError whose
// cause is ErrSendLate, not ambiguous: nothing of it may have been
// applied, and the caller intends again before it calls again.
func WithSendBy(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, sendByKey{}, t)
}

// ErrSendLate is the cause of a write call's TransientError when its next
// attempt would have been sent after WithSendBy's time: nothing sent by
// that attempt, and no earlier attempt of the call applied.
var ErrSendLate = errors.New("write not sent: its intent is too old (sent by the time the ledger promised, or not at all)")

// errAttemptTimeout is the cause of a TransientError when Options.Timeout
// cut an attempt.
var errAttemptTimeout = errors.New("attempt timed out")

// transportErr names a transport failure without the request URL.
func transportErr(actx, ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if actx.Err() != nil {
		return errAttemptTimeout
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// parseRetryAfter reads delay-seconds or an HTTP date; 0 if absent or bad.
func parseRetryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
		// Capped before the multiplication: a huge value would overflow
		// into a negative wait (found by FuzzRetryAfter). The caller caps
		// it again at RetryPolicy.MaxRetryAfter.
		return time.Duration(min(s, 24*60*60)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return min(d, 24*time.Hour)
		}
	}
	return 0
}
