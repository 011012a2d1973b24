package main

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

// progressLines are the scheduled progress lines of a replay's stderr
// that show done of planned records, with what they say records wait for.
func progressLines(stderr string, done, planned int) []string {
	var out []string
	prefix := regexp.MustCompile(`^` + regexp.QuoteMeta(fmt.Sprintf("%d/%d", done, planned)) + ` records replayed \(`)
	for _, l := range strings.Split(stderr, "\n") {
		if prefix.MatchString(l) {
			out = append(out, l)
		}
	}
	return out
}

// closedPort is an address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// A replay while the partner API's port is closed: progress lines keep
// coming on schedule with nothing done, saying the circuit is open and
// why; --max-wait gives up with exit 1, "still failing, replay later" and
// the counts.
func TestReplayWhileThePartnerIsDown(t *testing.T) {
	s := newOpsStack(t, sim.Options{})
	s.produce(t, nil, ids("down", 8)...)
	s.envs["LOYALTY_BRIDGE_API_AUTH_URL"] = s.st.SimURL // tokens come; calls find nothing listening
	s.envs["LOYALTY_BRIDGE_API_BASE_URL"] = "http://" + closedPort(t)
	s.tick = 50 * time.Millisecond
	code, out, errs := s.cli(t, "replay", "--topic", s.topics.Purchase, "--partition", "0", "--from-offset", "0",
		"--api-max-attempts", "1", "--record-attempts", "1000", "--record-backoff", "1ms",
		"--breaker-failures", "2", "--breaker-open-timeout", "1h", "--max-wait", "1s")
	if code != 1 || !strings.Contains(errs, "loyalty-bridge replay: still failing, replay later: 0 of 4 planned records replayed, 4 not finished") {
		t.Fatalf("replay: exit %d\n%s\n%s", code, out, errs)
	}
	stuck := 0
	for _, l := range progressLines(errs, 0, 4) {
		if strings.Contains(l, "circuit open since ") && strings.Contains(l, "connection refused") {
			stuck++
		}
	}
	if stuck < 2 || len(progressLines(errs, 0, 4)) < stuck {
		t.Errorf("%d progress lines saying the circuit is open, want 2 or more:\n%s", stuck, errs)
	}
	for d := 1; d <= 4; d++ {
		if l := progressLines(errs, d, 4); len(l) > 0 {
			t.Errorf("a record was done: %q", l)
		}
	}
	if !strings.Contains(out, "gave up: no record finished for 1s (--max-wait 1s): circuit open since ") || strings.Contains(out, "interrupted") {
		t.Errorf("summary:\n%s", out)
	}
}

// A replay while the partner answers 503 with Retry-After: the lines say
// calls wait to be retried as the partner asked, then that the circuit
// opened; --fail-fast gives up as soon as it opens.
func TestReplayWhileThePartnerAnswers503(t *testing.T) {
	s := newOpsStack(t, sim.Options{})
	s.produce(t, nil, ids("busy", 8)...)
	s.st.Sim.SetFaults(sim.Faults{ErrorRates: map[int]float64{503: 1}, RetryAfter: time.Second, Endpoints: []string{sim.EndpointAccrual}})
	s.tick = 50 * time.Millisecond
	code, out, errs := s.cli(t, "replay", "--topic", s.topics.Purchase, "--partition", "1", "--from-offset", "0",
		"--api-max-attempts", "2", "--record-attempts", "1000", "--record-backoff", "1ms", "--breaker-failures", "4", "--fail-fast")
	if code != 1 || !strings.Contains(errs, "loyalty-bridge replay: still failing, replay later: 0 of 4 planned records replayed, 4 not finished") {
		t.Fatalf("replay: exit %d\n%s\n%s", code, out, errs)
	}
	lines := progressLines(errs, 0, 4)
	retrying := 0
	for _, l := range lines {
		if strings.Contains(l, "retrying: 4 calls wait to be made again (point-accrual answered 503, Retry-After: 1, ") {
			retrying++
		}
	}
	if retrying < 2 {
		t.Errorf("%d lines saying calls wait for the partner's Retry-After, want 2 or more:\n%s", retrying, errs)
	}
	if !strings.Contains(out, "gave up: circuit open since ") || !strings.Contains(out, "point-accrual answered HTTP 503, Retry-After 1s), and --fail-fast") {
		t.Errorf("summary:\n%s", out)
	}
}

// A replay while the partner refuses the credentials: the lines say so,
// and --fail-fast gives up once the auth hold holds the records.
func TestReplayWhileCredentialsAreRefused(t *testing.T) {
	s := newOpsStack(t, sim.Options{})
	s.produce(t, nil, ids("auth", 8)...)
	s.st.Sim.SetFaults(sim.Faults{ErrorRates: map[int]float64{503: 1}, RetryAfter: sim.NoRetryAfter, Endpoints: []string{sim.EndpointAccrual}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errs testkit.SyncBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- run(ctx, env{stdin: strings.NewReader(""), stdout: &out, stderr: &errs, lookup: s.lookup, tick: 50 * time.Millisecond},
			[]string{"replay", "--topic", s.topics.Purchase, "--partition", "0", "--from-offset", "0", "--api-max-attempts", "1",
				"--record-attempts", "1000", "--record-backoff", "20ms", "--breaker-failures", "off", "--fail-fast"})
	}()
	// Once the records are retrying (a retry is no reason to give up),
	// the password is rotated and the tokens revoked, and the partner
	// answers again: the next attempts are refused for the credentials.
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(errs.String(), "retrying: ") {
		if time.Now().After(deadline) {
			t.Fatalf("no line says the records are retrying:\n%s", errs.String())
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
	s.st.Sim.RotateCredentials(sim.CredentialRotation{Password: "rotated", RevokeTokens: true})
	s.st.Sim.SetFaults(sim.Faults{})
	code := <-exit
	if code != 1 || !strings.Contains(errs.String(), "loyalty-bridge replay: still failing, replay later: 0 of 4 planned records replayed, 4 not finished") {
		t.Fatalf("replay: exit %d\n%s\n%s", code, out.String(), errs.String())
	}
	refused := false
	for _, l := range progressLines(errs.String(), 0, 4) {
		refused = refused || strings.Contains(l, "the partner refuses the credentials since ")
	}
	if !refused {
		t.Errorf("no progress line says the credentials are refused:\n%s", errs.String())
	}
	if !strings.Contains(out.String(), "gave up: the partner refuses the credentials since ") ||
		!strings.Contains(out.String(), "records are held until a token is obtainable again") {
		t.Errorf("summary:\n%s", out.String())
	}
	if s.st.Sim.TotalCalls(sim.EndpointAccrual) == 0 || len(s.st.Sim.Ledger()) != 0 {
		t.Errorf("accrual calls %d, ledger %v", s.st.Sim.TotalCalls(sim.EndpointAccrual), s.st.Sim.Ledger())
	}
}

// A replay's stderr is its plan, its progress lines and warnings: no info
// logs (tokens obtained, the Kafka client's chatter), whatever the
// partner does.
func TestReplayStderrIsProgressAndWarnings(t *testing.T) {
	s := newOpsStack(t, sim.Options{})
	delete(s.envs, "LOYALTY_BRIDGE_LOG_LEVEL")         // replay's own default
	s.envs["LOYALTY_BRIDGE_INCLUDE_ORIGINAL"] = "true" // a warning at start
	s.produce(t, nil, ids("clean", 6)...)
	s.st.Sim.SetFaults(sim.Faults{Latency: 30 * time.Millisecond})
	s.tick = 20 * time.Millisecond
	code, out, errs := s.cli(t, "replay", "--topic", s.topics.Purchase, "--since", "1h", "--max-in-flight", "1")
	if code != 0 || outcome(t, out, "APPLIED") != 6 {
		t.Fatalf("replay: exit %d\n%s\n%s", code, out, errs)
	}
	progress := regexp.MustCompile(`^\d+/\d+ records replayed \(\d+%\)  \d+/s  ETA \S+`)
	warnings := 0
	for _, l := range strings.Split(strings.TrimSuffix(errs, "\n"), "\n") {
		switch {
		case progress.MatchString(l), strings.HasPrefix(l, "replaying "+s.topics.Purchase+"/"):
		case strings.HasPrefix(l, `{"level":"warn"`):
			warnings++
		default:
			t.Errorf("stderr line %q is neither progress nor a warning", l)
		}
	}
	if warnings != 1 || len(progressLines(errs, 6, 6)) != 1 {
		t.Errorf("%d warnings, want 1 (--include-original); stderr:\n%s", warnings, errs)
	}
}
