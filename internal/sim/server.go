package sim

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"mime"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
)

// Endpoint names, as used by Calls, TotalCalls and Faults.Endpoints. They
// match the partner API client's endpoint names.
const (
	EndpointToken           = "token"
	EndpointExchangeToken   = "exchange-token"
	EndpointCustomerInfo    = "user-profile"
	EndpointCustomerProfile = "user-profile-ext"
	EndpointOnboard         = "onboard"
	EndpointLink            = "link-member"
	EndpointUnlink          = "unlink-member"
	EndpointRedemption      = "point-redemption"
	EndpointAccrual         = "point-accrual"
	EndpointLookup          = "lookup-transaction"
)

// AllEndpoints lists every endpoint name, token endpoints first.
var AllEndpoints = []string{EndpointToken, EndpointExchangeToken, EndpointCustomerInfo, EndpointCustomerProfile,
	EndpointOnboard, EndpointLink, EndpointUnlink, EndpointRedemption, EndpointAccrual, EndpointLookup}

// Paths served. {base_url} and {auth_url} are the same server.
const (
	PathToken           = "/realms/loyalty-partner/protocol/openid-connect/token"
	PathCerts           = "/realms/loyalty-partner/protocol/openid-connect/certs"
	PathExchangeToken   = "/api-identity/public/v1/exchange-token"
	PathCustomerInfo    = "/api-user/partner/v1/user-profile/"
	PathCustomerProfile = "/api-user/partner/v1/user-profile-ext/"
	PathOnboard         = "/api-user/partner/v1/user/onboard"
	PathLink            = "/api-user/partner/v1/user/link-member"
	PathUnlink          = "/api-user/partner/v1/user/unlink-member"
	PathRedemption      = "/api-point/partner/v1/point-redemption-with-token"
	PathAccrual         = "/api-point/partner/v1/point-accrual"
	PathLookup          = "/api-point/partner/v1/lookup-transaction-id"
	PathAdmin           = "/__sim/"
)

// Server is the simulated partner API: identity provider, exchange-token
// and every business endpoint on one http.Handler. All methods are safe for
// concurrent use.
type Server struct {
	opts Options
	log  *zap.Logger
	now  func() time.Time
	mux  *http.ServeMux

	// The two kinds of partner JWT: exchange-token's and the redemption
	// sign.
	exchangeJWT, signJWT partnerJWT
	replay               replayCache

	closeOnce sync.Once
	closing   chan struct{}

	// Token signing key and issued tokens.
	signKey *rsa.PrivateKey
	kid     string
	jwks    []byte
	tokens  tokenStore

	keysMu      sync.RWMutex
	partnerKeys []PartnerKey

	// credMu guards the secrets RotateCredentials changes. A grant holds
	// it for reading from its check to its tokens being stored, so that a
	// rotation that revokes tokens leaves none issued for the old secrets.
	credMu       sync.RWMutex
	clientSecret string
	password     string

	faultsMu sync.Mutex
	faults   Faults
	rng      *rand.Rand

	// inFlight counts the business requests holding a place of
	// Options.Capacity.
	inFlight        atomic.Int64
	overCapacityMsg string
	// handling, a test hook (export_test.go), is called once a request
	// holds its place, before faults and the handler; nil otherwise.
	handling func(endpoint string)

	late lateApplies

	countMu      sync.Mutex
	calls        map[callKey]int
	totals       map[string]int
	overCapacity map[string]int
	issued       int
	lateLanded   int

	st state
}

type callKey struct {
	endpoint string
	status   int
}

// New validates opts (reporting every problem together) and returns a
// Server with its own freshly generated RSA token-signing key.
func New(opts Options) (*Server, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	key, err := rsa.GenerateKey(crand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("sim: generate token signing key: %w", err)
	}
	s := &Server{
		opts: o, log: o.Logger, now: o.Now, closing: make(chan struct{}),
		signKey: key, partnerKeys: append([]PartnerKey(nil), o.PartnerKeys...),
		clientSecret: o.ClientSecret, password: o.Password,
		faults: o.Faults.clone(), rng: rand.New(rand.NewPCG(uint64(o.Seed), uint64(o.Seed)^0x9e3779b97f4a7c15)),
		calls: map[callKey]int{}, totals: map[string]int{}, overCapacity: map[string]int{},
		overCapacityMsg: fmt.Sprintf("more than %d requests at once", o.Capacity),
	}
	s.exchangeJWT = s.partnerJWTKind("partner token", o.Profile.JWT.PartnerToken)
	s.signJWT = s.partnerJWTKind("sign", o.Profile.JWT.Sign)
	s.kid, s.jwks = jwksFor(&key.PublicKey)
	s.replay.init(o.ReplayCacheSize)
	s.tokens.init(o.AccessTokenTTL, o.RefreshTokenTTL)
	s.st.init(o)
	s.mux = s.routes()
	return s, nil
}

// route describes one endpoint.
type route struct {
	name   string
	method string
	write  bool // a write: ApplyThen500Rate applies
	bearer bool // needs a valid access token: a business endpoint, limited by Options.Capacity
	handle func(s *Server, c *call) reply
	// refuse answers a request refused before its handler (a wrong
	// Content-Type); nil: the error envelope with INVALID_REQUEST.
	refuse func(msg string) reply
}

// checkContentType refuses a business request whose Content-Type is not
// application/json: the spec lists the header as required on every
// business endpoint, the GETs included, and its error section answers a
// bad request with the error envelope and 400. The zero reply means the
// header is right.
func (rt *route) checkContentType(r *http.Request) reply {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err == nil && mt == "application/json" {
		return reply{}
	}
	const msg = "Content-Type must be application/json"
	if rt.refuse != nil {
		return rt.refuse(msg)
	}
	return badRequest(CodeInvalidRequest, msg)
}

// call is one request being handled.
type call struct {
	w http.ResponseWriter
	r *http.Request
	// later, when set, takes a write's effect instead of the handler
	// applying it (Faults.LateApplyRate): the handler checks the request
	// first, as on arrival, and hands over only what a partner that
	// accepted it would apply.
	later func(apply func() reply)
}

// reply is a handler's answer, written by serve.
type reply struct {
	status int
	body   any
	header map[string]string
}

func (s *Server) routes() *http.ServeMux {
	m := http.NewServeMux()
	for path, rt := range map[string]*route{
		PathToken:                        {name: EndpointToken, method: http.MethodPost, handle: (*Server).handleToken},
		PathExchangeToken:                {name: EndpointExchangeToken, method: http.MethodPost, handle: (*Server).handleExchange},
		PathCustomerInfo + "{loyaltyId}": {name: EndpointCustomerInfo, method: http.MethodGet, bearer: true, handle: (*Server).handleCustomerInfo},
		PathCustomerProfile + "{loyaltyId}": {name: EndpointCustomerProfile, method: http.MethodGet, bearer: true,
			handle: (*Server).handleCustomerProfile},
		PathOnboard: {name: EndpointOnboard, method: http.MethodPost, write: true, bearer: true, handle: (*Server).handleOnboard,
			refuse: func(string) reply { return onboardFail(ReasonInvalidRequest, "") }},
		PathLink:       {name: EndpointLink, method: http.MethodPost, write: true, bearer: true, handle: (*Server).handleLink},
		PathUnlink:     {name: EndpointUnlink, method: http.MethodPost, write: true, bearer: true, handle: (*Server).handleUnlink},
		PathRedemption: {name: EndpointRedemption, method: http.MethodPost, write: true, bearer: true, handle: (*Server).handleRedemption},
		PathAccrual:    {name: EndpointAccrual, method: http.MethodPost, write: true, bearer: true, handle: (*Server).handleAccrual},
		PathLookup:     {name: EndpointLookup, method: http.MethodPost, bearer: true, handle: (*Server).handleLookup},
	} {
		m.HandleFunc(path, s.serve(rt))
	}
	m.HandleFunc(PathCerts, s.handleCerts)
	m.HandleFunc(PathAdmin, s.handleAdmin)
	m.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeReply(w, plainError(http.StatusNotFound))
	})
	return m
}

// ServeHTTP serves the token endpoints under /realms/loyalty-partner/…,
// exchange-token, the business endpoints under /api-user and /api-point,
// and the admin API under /__sim/ when enabled.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close ends every hanging or delayed request (their connections are
// closed without an answer). Call it before http.Server.Shutdown or
// httptest.Server.Close, which otherwise wait for hung requests. The
// Server keeps serving; later hangs end at once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.late.stop()
	})
}

func (s *Server) serve(rt *route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		s.countMu.Lock()
		s.totals[rt.name]++
		s.countMu.Unlock()
		status := 0 // 0: no answer (dropped, hung, or the client left)
		counted := false
		count := func() {
			if !counted {
				counted = true
				s.countMu.Lock()
				s.calls[callKey{rt.name, status}]++
				s.countMu.Unlock()
			}
		}
		// free gives back the request's place of Options.Capacity, before
		// its answer is written.
		held := false
		free := func() {
			if held {
				held = false
				s.inFlight.Add(-1)
			}
		}
		// drop closes the connection unanswered, counting the call first:
		// the client may read the counters as soon as it sees the close.
		drop := func() { free(); count(); abort(w) }
		defer func() {
			free()
			count()
			if ce := s.log.Check(zap.DebugLevel, "request"); ce != nil {
				ce.Write(zap.String("endpoint", rt.name), zap.Int("status", status), zap.Duration("took", time.Since(start)))
			}
		}()
		if r.Method != rt.method {
			rep := plainError(http.StatusMethodNotAllowed)
			rep.header = map[string]string{"Allow": rt.method}
			status = writeReply(w, rep)
			return
		}
		if rt.bearer && s.opts.Capacity > 0 {
			if s.inFlight.Add(1) > int64(s.opts.Capacity) {
				s.inFlight.Add(-1)
				s.countMu.Lock()
				s.overCapacity[rt.name]++
				s.countMu.Unlock()
				status = writeReply(w, s.overCapacityReply())
				return
			}
			held = true
		}
		if s.handling != nil {
			s.handling(rt.name)
		}
		p := s.planFaults(rt.name, rt.write)
		if p.delay > 0 || p.hang {
			// net/http notices a client leaving only once the body has
			// been read; read it now so that waiting ends with the client.
			bufferBody(w, r)
		}
		if p.delay > 0 && !s.wait(r.Context(), p.delay) {
			if p.lateApply && s.lateCheck(rt, r) {
				s.acceptLate(rt, &call{w: &discardWriter{header: http.Header{}}, r: r}, p.lateDelay)
			}
			drop()
			return
		}
		switch {
		case p.drop:
			drop()
			return
		case p.hang:
			select {
			case <-r.Context().Done():
			case <-s.closing:
			}
			drop()
			return
		case p.status != 0:
			rep := plainError(p.status)
			if p.retryAfter != "" {
				rep.header = map[string]string{"Retry-After": p.retryAfter}
			}
			free()
			status = writeReply(w, rep)
			return
		}
		c := &call{w: w, r: r}
		var rep reply
		if rt.bearer {
			rep = s.authorize(r)
		}
		if rep.status == 0 && rt.bearer {
			rep = rt.checkContentType(r)
		}
		if rep.status == 0 && p.lateApply {
			s.acceptLate(rt, c, p.lateDelay)
			rep = plainError(http.StatusGatewayTimeout)
		}
		if rep.status == 0 {
			rep = rt.handle(s, c)
		}
		if p.applyThen500 && rep.status == http.StatusOK {
			rep = plainError(http.StatusInternalServerError)
		}
		if p.nullNumbers && rep.status == http.StatusOK {
			rep = withoutNumbers(rep, p.absent)
		}
		free()
		status = writeReply(w, rep)
	}
}

// overCapacityReply answers a business request beyond Options.Capacity,
// with the Retry-After of the faults in force.
func (s *Server) overCapacityReply() reply {
	rep := bizError(s.opts.OverCapacityStatus, CodeOverCapacity, s.overCapacityMsg)
	s.faultsMu.Lock()
	retryAfter := s.faults.retryAfterSeconds()
	s.faultsMu.Unlock()
	if retryAfter != "" {
		rep.header = map[string]string{"Retry-After": retryAfter}
	}
	return rep
}

func (s *Server) planFaults(endpoint string, write bool) faultPlan {
	s.faultsMu.Lock()
	defer s.faultsMu.Unlock()
	return s.faults.plan(s.rng, endpoint, write)
}

// wait sleeps d unless the client leaves or the Server closes first.
func (s *Server) wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-s.closing:
	}
	return false
}

// bufferBody reads the (size-limited) body into memory and puts it back,
// or a reader repeating the read error.
func bufferBody(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		r.Body = io.NopCloser(errReader{err})
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// abort closes the connection without an answer.
func abort(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

func writeReply(w http.ResponseWriter, rep reply) int {
	b, err := json.Marshal(rep.body)
	if err != nil {
		// Only our own response types are marshalled; this is a bug.
		rep.status = http.StatusInternalServerError
		b, _ = json.Marshal(statusOnly{http.StatusInternalServerError, http.StatusText(http.StatusInternalServerError)})
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	for k, v := range rep.header {
		h.Set(k, v)
	}
	w.WriteHeader(rep.status)
	_, _ = w.Write(b)
	return rep.status
}

// Envelopes.

type envelope struct {
	StatusCode int        `json:"statusCode"`
	Message    string     `json:"message"`
	Data       any        `json:"data,omitempty"`
	Errors     *errorBody `json:"errors,omitempty"`
}

type errorBody struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	ErrorCode string `json:"errorCode,omitempty"`
	Name      string `json:"name,omitempty"`
}

type statusOnly struct {
	StatusCode int    `json:"statusCode"`
	Message    string `json:"message"`
}

func ok(data any) reply {
	return reply{status: http.StatusOK, body: envelope{StatusCode: http.StatusOK, Message: "SUCCESS", Data: data}}
}

// bizError is the error envelope with one of our codes in code and
// errorCode.
func bizError(status int, code, msg string) reply {
	return reply{status: status, body: envelope{StatusCode: status, Message: http.StatusText(status),
		Errors: &errorBody{Code: code, Message: msg, ErrorCode: code}}}
}

func badRequest(code, msg string) reply { return bizError(http.StatusBadRequest, code, msg) }

// plainError is the body of injected faults, 404 and 405:
// {"statusCode":503,"message":"Service Unavailable"}.
func plainError(status int) reply {
	return reply{status: status, body: statusOnly{status, http.StatusText(status)}}
}

// Error codes of our own: the spec names no code for these conditions.
// CodeMemberNotFound, CodeDuplicateTransaction and CodeTransactionNotFound
// are the default profile's (partnerprofile owns them; Options.Profile may
// name others).
const (
	CodeMemberNotFound       = partnerprofile.DefaultMemberNotFoundCode
	CodeInsufficientPoint    = "INSUFFICIENT_POINT"
	CodeDuplicateTransaction = partnerprofile.DefaultDuplicateCode
	CodeInvalidSign          = partnerprofile.DefaultSignRefusedCode
	CodeInvalidRequest       = partnerprofile.DefaultInvalidRequestCode
	CodeTransactionNotFound  = partnerprofile.DefaultNotFoundCode
	CodePartnerMemberInUse   = "PARTNER_MEMBER_ID_IN_USE"
	CodeUnauthorized         = "UNAUTHORIZED"
	// CodeOverCapacity answers a business request beyond Options.Capacity.
	CodeOverCapacity = "OVER_CAPACITY"
)

// Spec-given link errors.
const (
	CodeMemberIsLinked       = "MEMBER_IS_LINKED"
	CodeMemberIsNotLinkedYet = "MEMBER_IS_NOT_LINKED_YET"
)

var errBodyTooLarge = errors.New("request body too large")

// readBody reads at most MaxBodyBytes of the body.
func readBody(c *call) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(c.w, c.r.Body, MaxBodyBytes))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, errBodyTooLarge
	}
	return b, err
}

// jsonBody reads the body of a business call (serve has checked its
// Content-Type); the reply is set when it cannot be read.
func jsonBody(c *call) ([]byte, *reply) {
	b, err := readBody(c)
	if err != nil {
		rep := badRequest(CodeInvalidRequest, "could not read the request body")
		if errors.Is(err, errBodyTooLarge) {
			rep = bizError(http.StatusRequestEntityTooLarge, CodeInvalidRequest, fmt.Sprintf("request body larger than %d bytes", MaxBodyBytes))
		}
		return nil, &rep
	}
	return b, nil
}

// decodeProblem turns a json.Unmarshal error into a message naming the
// field, never quoting the input.
func decodeProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return "request body must be a JSON object"
		}
		return fmt.Sprintf("%s: wrong JSON type (want %s)", te.Field, jsonTypeName(te.Type.Kind().String()))
	}
	return "request body is not valid JSON"
}

func jsonTypeName(kind string) string {
	switch kind {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "ptr":
		return "a value of another type"
	case "struct", "map":
		return "object"
	}
	return "number"
}

// Counters and typed controls.

// Calls is how many requests to endpoint were answered with status; status
// 0 counts requests that got no answer (dropped, hung, or abandoned by the
// client during injected latency).
func (s *Server) Calls(endpoint string, status int) int {
	s.countMu.Lock()
	defer s.countMu.Unlock()
	return s.calls[callKey{endpoint, status}]
}

// TotalCalls is how many requests to endpoint arrived (counted on arrival,
// so a hung request counts at once).
func (s *Server) TotalCalls(endpoint string) int {
	s.countMu.Lock()
	defer s.countMu.Unlock()
	return s.totals[endpoint]
}

// OverCapacity is how many requests to endpoint were answered
// Options.OverCapacityStatus because Options.Capacity requests were being
// handled (they are in Calls under that status too).
func (s *Server) OverCapacity(endpoint string) int {
	s.countMu.Lock()
	defer s.countMu.Unlock()
	return s.overCapacity[endpoint]
}

// TokensIssued counts successful password and refresh grants and
// exchange-token calls.
func (s *Server) TokensIssued() int {
	s.countMu.Lock()
	defer s.countMu.Unlock()
	return s.issued
}

// Counters is a snapshot of every counter, as served by /__sim/counters.
type Counters struct {
	TokensIssued int                    `json:"tokensIssued"`
	Calls        map[string]map[int]int `json:"calls"`  // endpoint → status → answered
	Totals       map[string]int         `json:"totals"` // endpoint → arrived
	// OverCapacity: endpoint → answered over Options.Capacity (also in
	// Calls).
	OverCapacity map[string]int `json:"overCapacity"`
	// LateLanded counts late writes (Faults.LateApplyRate) handled when
	// they landed, whatever the answer: under DuplicateReject one that a
	// repeat overtook is refused then, so Effects, not this, says what
	// applied. LatePending counts those not landed yet; LateDropped those
	// Close dropped, and those accepted after it.
	LateLanded  int `json:"lateLanded,omitempty"`
	LatePending int `json:"latePending,omitempty"`
	LateDropped int `json:"lateDropped,omitempty"`
}

// Counters returns a copy of every counter.
func (s *Server) Counters() Counters {
	// Read outside countMu: nothing waits for the late writes' lock while
	// holding countMu, which a write landing takes.
	pending, dropped := s.late.counts()
	s.countMu.Lock()
	defer s.countMu.Unlock()
	c := Counters{TokensIssued: s.issued, Calls: map[string]map[int]int{}, Totals: maps.Clone(s.totals),
		OverCapacity: maps.Clone(s.overCapacity), LateLanded: s.lateLanded, LatePending: pending, LateDropped: dropped}
	for k, n := range s.calls {
		if c.Calls[k.endpoint] == nil {
			c.Calls[k.endpoint] = map[int]int{}
		}
		c.Calls[k.endpoint][k.status] = n
	}
	return c
}

// SetFaults replaces the faults in force; invalid faults are ignored and
// logged (use Faults.Validate first, or the admin API, which answers 400).
func (s *Server) SetFaults(f Faults) {
	if err := f.Validate(); err != nil {
		s.log.Error("invalid faults ignored", zap.Error(err))
		return
	}
	s.faultsMu.Lock()
	s.faults = f.clone()
	s.faultsMu.Unlock()
	s.log.Info("faults set", zap.Any("faults", f))
}

// Faults returns a copy of the faults in force.
func (s *Server) Faults() Faults {
	s.faultsMu.Lock()
	defer s.faultsMu.Unlock()
	return s.faults.clone()
}

// AddPartnerKey registers another partner public key. A key of an
// unsupported type is ignored (logged): it could never verify anything.
func (s *Server) AddPartnerKey(k PartnerKey) {
	if err := k.validate(); err != nil {
		s.log.Error("partner key ignored", zap.Error(err))
		return
	}
	s.keysMu.Lock()
	s.partnerKeys = append(s.partnerKeys, k)
	s.keysMu.Unlock()
	s.log.Info("partner key added", zap.String("kid", k.KID))
}
