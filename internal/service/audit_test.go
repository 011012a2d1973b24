package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/devstack"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/telemetry"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The secret and PII audit: canary credentials, the partner private key,
// issued tokens and personal data of onboardings (valid ones, and ones
// failing validation and the partner's checks) go through the whole service
// with debug logging; no log line and no output record (values decoded,
// keys, headers) carries any of them. The original record value of error
// events is excluded: carrying it is their purpose (switch it off with
// --include-original=false).
func TestSecretAndPIIAudit(t *testing.T) {
	const (
		canarySecret   = "canary-client-secret-7f3a"
		canaryPassword = "canary-password-9c1e"
		phone          = "+84912345678"
		fullName       = "Canaryname Tran"
		email          = "canary.audit@example.net"
		idNumber       = "079288001122"
		passport       = "B7766554"
		address        = "12 Canary Lane, Da Nang"
		birthday       = "1991-02-03"
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := devstack.Start(ctx, devstack.Options{DataDir: t.TempDir(), KafkaAddr: "127.0.0.1:0", RegistryAddr: "127.0.0.1:0",
		SimAddr: "127.0.0.1:0", Partitions: 2, Topics: codec.DefaultTopics().All(),
		Sim: sim.Options{Members: 10, ClientSecret: canarySecret, Password: canaryPassword}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := stackConfig(t, st, func(c *config.Config) {
		c.ClientSecret, c.Password = canarySecret, canaryPassword
		c.PartnerKey, c.PartnerKeyID = st.PartnerKeyPath, st.PartnerKeyID
		c.LogLevel = "debug"
	})
	logs := &syncBuffer{}
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
	send := func(topic string, ev events.Event) {
		v, err := svc.Codec.Encode(topic, ev)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("k"), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	onboard := func(id, gender, externalID string) *events.MemberOnboardRequested {
		e, idn, pp := email, idNumber, passport
		return &events.MemberOnboardRequested{TransactionID: id, Phone: phone, FullName: fullName, Gender: gender, Birthday: birthday,
			Email: &e, IsKYC: true, IDNumber: &idn, PassportNumber: &pp, PlaceOfIssue: "Da Nang", PlaceOfBirth: "Hue",
			IssueDate: "2016-01-01", ExpireDate: "2036-01-01", Nationality: "VNM", Address: address, ExternalID: externalID}
	}
	mt, pt, rt := codec.DefaultMemberOnboardingTopic, codec.DefaultPurchaseTopic, codec.DefaultRefundRedemptionTopic
	send(mt, onboard("a-1", "female", "ext-1"))
	send(mt, onboard("a-2", "robot", "ext-2"))  // VALIDATION
	send(mt, onboard("a-3", "female", "ext-1")) // the partner refuses a second enrolment
	send(pt, &events.PurchaseCompleted{TransactionID: "a-4", LoyaltyID: sim.MemberID(1), TransactionDate: time.Now(), Amount: 1000, Currency: "VND"})
	send(rt, &events.RedemptionRequested{TransactionID: "a-5", LoyaltyID: sim.MemberID(1), TransactionDate: time.Now(), Amount: 1, UsedPoint: 1})
	// Tokens revoked mid-run: the bridge logs in again (a token refresh path).
	st.Sim.RevokeTokens()
	send(pt, &events.PurchaseCompleted{TransactionID: "a-6", LoyaltyID: sim.MemberID(2), TransactionDate: time.Now(), Amount: 1000, Currency: "VND"})

	topics := codec.DefaultTopics()
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
	for len(seen) < 6 {
		if ctx.Err() != nil {
			t.Fatalf("only %d of 6 outputs", len(seen))
		}
		pctx, pcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		rc.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
			seen[string(r.Key)] = true
			v, err := svc.Codec.Decode(ctx, r.Topic, r.Value)
			if err != nil {
				t.Errorf("output on %s: %v", r.Topic, err)
				return
			}
			if e, ok := v.(*events.LoyaltyError); ok {
				e.OriginalValue = nil // by design; see the test's doc
			}
			j, _ := json.Marshal(v)
			outputs = append(outputs, fmt.Sprintf("key=%s headers=%v value=%s", r.Key, r.Headers, j))
		})
		pcancel()
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	key, err := os.ReadFile(st.PartnerKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	keyLines := strings.Split(strings.TrimSpace(string(key)), "\n")
	canaries := []string{canarySecret, canaryPassword, phone, fullName, "Canaryname", email, idNumber, passport, address, birthday,
		"eyJ",       // the start of every JWT: access, refresh, partner and sign tokens
		keyLines[1]} // a line of the private key's base64 body
	all := logs.String() + strings.Join(outputs, "\n")
	if len(outputs) < 6 || !strings.Contains(logs.String(), "access token obtained") {
		t.Fatalf("the audit saw too little: %d outputs, logs:\n%s", len(outputs), logs.String())
	}
	for _, c := range canaries {
		if i := strings.Index(all, c); i >= 0 {
			t.Errorf("canary %q leaked: …%s…", c, all[max(0, i-80):min(len(all), i+80)])
		}
	}
}
