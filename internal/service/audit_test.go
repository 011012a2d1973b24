package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/telemetry"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tracing"
)

// tokenTap is a reverse proxy in front of the simulator that remembers every
// credential crossing it: access and refresh tokens as issued, and the
// JWTs the bridge sends (redemption signs). Those become canaries.
type tokenTap struct {
	mu     sync.Mutex
	tokens map[string]bool
}

func (tp *tokenTap) add(v string) {
	if len(v) >= 16 {
		tp.mu.Lock()
		tp.tokens[v] = true
		tp.mu.Unlock()
	}
}

func (tp *tokenTap) all() []string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	var out []string
	for v := range tp.tokens {
		out = append(out, v)
	}
	return out
}

func newTokenTap(t *testing.T, target string) (*tokenTap, string) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	tp := &tokenTap{tokens: map[string]bool{}}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ModifyResponse = func(resp *http.Response) error {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		resp.Body = io.NopCloser(bytes.NewReader(b))
		var grant struct {
			Access  string `json:"access_token"`
			Refresh string `json:"refresh_token"`
			ID      string `json:"id_token"`
		}
		if json.Unmarshal(b, &grant) == nil {
			tp.add(grant.Access)
			tp.add(grant.Refresh)
			tp.add(grant.ID)
		}
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tp.add(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		if r.Body != nil {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			var body struct {
				Sign string `json:"sign"`
			}
			if json.Unmarshal(b, &body) == nil {
				tp.add(body.Sign)
			}
			if form, err := url.ParseQuery(string(b)); err == nil {
				for _, k := range []string{"refresh_token", "assertion", "subject_token", "client_assertion"} {
					tp.add(form.Get(k))
				}
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return tp, srv.URL
}

// The secret and PII audit: canary credentials, the partner private key,
// every token issued and every JWT sent, and personal data (in
// onboardings that are valid, invalid or refused by the partner, in a
// purchase description, in an undecodable record) go through the whole
// service with debug logging and the default settings. No log line, no
// output record (raw bytes, decoded value, key, headers) and no page of
// /metrics, /healthz or /readyz carries any of them. Error events carry no
// original by default; --include-original=true carries the original
// record, by design: that is what the flag is for.
func TestSecretAndPIIAudit(t *testing.T) { audit(t, nil) }

// The same audit with tracing on (OTLP, every record sampled): no span
// name, attribute or resource the receiver gets carries any canary either.
func TestSecretAndPIIAuditTraced(t *testing.T) { audit(t, newOTLPReceiver(t)) }

// audit runs the secret and PII audit; with rcv, tracing exports to it
// and every span it received is audited too.
func audit(t *testing.T, rcv *otlpReceiver) {
	const (
		canarySecret   = "canary-client-secret-7f3a"
		canaryPassword = "canary-password-9c1e"
		phone          = "+84912345678"
		fullName       = "Canaryname Tran"
		firstName      = "Canaryfirst"
		lastName       = "Canarylast"
		email          = "canary.audit@example.net"
		idNumber       = "079288001122"
		passport       = "B7766554"
		address        = "12 Canary Lane, Da Nang"
		birthday       = "1991-02-03"
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := newStackWith(t, 2, sim.Options{Members: 10, ClientSecret: canarySecret, Password: canaryPassword})
	tap, apiURL := newTokenTap(t, st.SimURL)
	cfg := stackConfig(t, st, func(c *config.Config) {
		c.API.BaseURL = apiURL
		c.API.ClientSecret, c.API.Password = canarySecret, canaryPassword
		c.API.PartnerKey, c.API.PartnerKeyID = st.PartnerKeyPath, st.PartnerKeyID
		c.Ops.LogLevel = "debug"
		if rcv != nil {
			c.Tracing.Exporter, c.Tracing.SampleRatio = tracing.OTLP, 1
		}
	})
	logs := &testkit.SyncBuffer{}
	log, err := telemetry.NewLogger(telemetry.LogOptions{Format: "json", Level: "debug", Output: logs})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := New(ctx, cfg, Options{Logger: log, MetricsListener: ln, ClientOpts: fastGroup()})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(runCtx) }()

	cl, err := kgo.NewClient(kgo.SeedBrokers(st.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var ids []string
	sendRaw := func(topic, id string, v []byte) {
		// Keyed by the phone, as a producer of onboardings may: a key is
		// personal data that no span may carry.
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(phone), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	send := func(topic string, ev events.Event) {
		v, err := svc.Codec.Encode(topic, ev)
		if err != nil {
			t.Fatal(err)
		}
		sendRaw(topic, ev.ID(), v)
	}
	onboard := func(id, gender, externalID string) *events.MemberOnboardRequested {
		e, idn, pp, fn, ln := email, idNumber, passport, firstName, lastName
		return &events.MemberOnboardRequested{TransactionID: id, Phone: phone, FullName: fullName, FirstName: &fn, LastName: &ln,
			Gender: gender, Birthday: birthday, Email: &e, IsKYC: true, IDNumber: &idn, PassportNumber: &pp, PlaceOfIssue: "Da Nang",
			PlaceOfBirth: "Hue", IssueDate: "2016-01-01", ExpireDate: "2036-01-01", Nationality: "VNM", Address: address, ExternalID: externalID}
	}
	mt, pt, rt := st.Topics.MemberOnboarding, st.Topics.Purchase, st.Topics.RefundRedemption
	send(mt, onboard("a-1", "female", "ext-1"))
	send(mt, onboard("a-2", "robot", "ext-2"))  // VALIDATION
	send(mt, onboard("a-3", "female", "ext-1")) // the partner refuses a second enrolment
	send(pt, &events.PurchaseCompleted{TransactionID: "a-4", LoyaltyID: sim.MemberID(1), TransactionDate: time.Now(), Amount: 1000, Currency: "VND"})
	send(rt, &events.RedemptionRequested{TransactionID: "a-5", LoyaltyID: sim.MemberID(1), TransactionDate: time.Now(), Amount: 1, UsedPoint: 1})
	// Personal data in free-form fields: a description the partner gets,
	// and one that fails validation.
	desc, badDesc := fmt.Sprintf(`{"note":"call %s"}`, phone), fmt.Sprintf(`{"note":"%s"`, email)
	send(pt, &events.PurchaseCompleted{TransactionID: "a-7", LoyaltyID: sim.MemberID(3), TransactionDate: time.Now(), Amount: 10, Currency: "VND", Description: &desc})
	send(pt, &events.PurchaseCompleted{TransactionID: "a-8", LoyaltyID: sim.MemberID(3), TransactionDate: time.Now(), Amount: 10, Currency: "VND", ExtraData: &badDesc})
	// An undecodable record full of personal data: a DECODE error event.
	sendRaw(pt, fmt.Sprintf("%s/", pt), append([]byte{0, 0, 0, 0, 1}, []byte(phone+email+idNumber)...))
	// Tokens revoked mid-run: the bridge logs in again (a token refresh path).
	st.Sim.RevokeTokens()
	send(pt, &events.PurchaseCompleted{TransactionID: "a-6", LoyaltyID: sim.MemberID(2), TransactionDate: time.Now(), Amount: 1000, Currency: "VND"})

	topics := st.Topics
	var replies []string
	for _, in := range topics.Inputs() {
		replies = append(replies, topics.ResultTopic(in), topics.ErrorTopic(in))
	}
	rc, err := kgo.NewClient(kgo.SeedBrokers(st.Brokers...), kgo.ConsumeTopics(replies...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var outputs []string
	seen := map[string]bool{}
	covered := func() bool {
		for _, id := range ids {
			if !seen[id] && !(strings.HasSuffix(id, "/") && anyPrefix(seen, id)) {
				return false
			}
		}
		return true
	}
	for !covered() {
		if ctx.Err() != nil {
			t.Fatalf("outputs for only %v of %v", seen, ids)
		}
		pctx, pcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		rc.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
			seen[string(r.Key)] = true
			v, err := svc.Codec.Decode(ctx, r.Topic, r.Value)
			if err != nil {
				t.Errorf("output on %s: %v", r.Topic, err)
				return
			}
			if e, ok := v.(*events.LoyaltyError); ok && len(e.OriginalValue) > 0 {
				t.Errorf("%s: original value carried by default", r.Key)
			}
			j, _ := json.Marshal(v)
			outputs = append(outputs, fmt.Sprintf("key=%s headers=%v raw=%q value=%s", r.Key, r.Headers, r.Value, j))
		})
		pcancel()
	}
	var pages []string
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		_, body := get("http://" + svc.MetricsAddr() + path)
		pages = append(pages, body)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var spans []string
	if rcv != nil {
		if err := svc.Tracing.Shutdown(ctx); err != nil { // flushes the spans still batched
			t.Fatal(err)
		}
		spans = rcv.json()
		if len(rcv.all()) < 5*len(ids) {
			t.Fatalf("the receiver got %d spans for %d records; the audit would prove little", len(rcv.all()), len(ids))
		}
	}

	key, err := os.ReadFile(st.PartnerKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	canaries := []string{canarySecret, canaryPassword, phone, fullName, "Canaryname", firstName, lastName, email, idNumber, passport,
		address, birthday, "PRIVATE KEY"}
	for _, l := range strings.Split(strings.TrimSpace(string(key)), "\n") {
		if len(l) >= 16 && !strings.HasPrefix(l, "-----") {
			canaries = append(canaries, l) // the private key's base64 body, line by line
		}
	}
	tokens := tap.all()
	if len(tokens) < 3 {
		t.Fatalf("the tap saw %d tokens; the audit would prove little", len(tokens))
	}
	canaries = append(canaries, tokens...)
	all := logs.String() + strings.Join(outputs, "\n") + strings.Join(pages, "\n") + strings.Join(spans, "\n")
	if len(outputs) < len(ids) || !strings.Contains(logs.String(), "access token obtained") {
		t.Fatalf("the audit saw too little: %d outputs for %d inputs, logs:\n%s", len(outputs), len(ids), logs.String())
	}
	for _, c := range canaries {
		if i := strings.Index(all, c); i >= 0 {
			t.Errorf("canary %.24q leaked: …%s…", c, all[max(0, i-80):min(len(all), i+80)])
		}
	}
	// Any JWT at all (access, refresh, partner and sign tokens), tapped or
	// not: a header and a payload, both JSON objects. "eyJ" alone is not
	// enough: a random trace ID holds it about once in twenty runs.
	jwtShape := regexp.MustCompile(`eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}`)
	if !slices.ContainsFunc(tokens, jwtShape.MatchString) {
		t.Fatalf("no token on the wire has the JWT shape the audit looks for: %.40q", tokens)
	}
	if loc := jwtShape.FindStringIndex(all); loc != nil {
		t.Errorf("a JWT leaked: …%s…", all[max(0, loc[0]-80):min(len(all), loc[1]+80)])
	}
	t.Logf("audited %d log bytes, %d output records, %d pages, %d span exports against %d canaries (%d tokens seen on the wire)",
		len(logs.String()), len(outputs), len(pages), len(spans), len(canaries), len(tokens))
}

// anyPrefix reports whether a key in seen starts with prefix (an
// undecodable record's output is keyed topic/partition/offset).
func anyPrefix(seen map[string]bool, prefix string) bool {
	for k := range seen {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}
