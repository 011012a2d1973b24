//go:build !production

package main

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/devstack"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

func devRun(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	base := []string{"dev", "--data-dir", dir, "--kafka-addr", "127.0.0.1:0", "--registry-addr", "127.0.0.1:0",
		"--sim-addr", "127.0.0.1:0", "--metrics-addr", "", "--partitions", "2", "--members", "20", "--log-level", "warn"}
	code := run(ctx, env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, lookup: func(string) (string, bool) { return "", false }},
		append(base, args...))
	return code, out.String(), errb.String()
}

// The README's tour (docs/development.md): a demo that accounts for every event, then a
// second run on the same data dir that resumes instead of reprocessing.
func TestDevDemoExitsWhenDoneAndResumes(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := devRun(t, dir, "--demo", "120", "--exit-when-done")
	if code != 0 {
		t.Fatalf("first run: exit %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"Kafka", "Schema Registry", "Partner API sim", "every event got its output",
		"APPLIED", "error DECODE", "error VALIDATION", "ALREADY_LINKED", "NOT_LINKED", "ONBOARDED"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out2, errs := devRun(t, dir, "--demo", "40", "--exit-when-done")
	if code != 0 {
		t.Fatalf("second run: exit %d\n%s\n%s", code, out2, errs)
	}
	// No transaction of the first run was answered twice: its records were
	// committed and not reprocessed by the second.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stack, err := devstack.Start(ctx, devstack.Options{DataDir: dir, KafkaAddr: "127.0.0.1:0", RegistryAddr: "127.0.0.1:0", SimAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer stack.Close()
	topics := codec.DefaultTopics()
	var replies []string
	for _, in := range topics.Inputs() {
		replies = append(replies, topics.ResultTopic(in), topics.ErrorTopic(in))
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(stack.Brokers...), kgo.ConsumeTopics(replies...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[string]int{}
	total := 0
	for idle := 0; idle < 3; {
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		pcancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Key)]++; n++ })
		total += n
		if n == 0 {
			idle++
		}
	}
	if total == 0 {
		t.Fatal("no replies persisted")
	}
	for k, c := range seen {
		if c > 1 {
			t.Errorf("transaction %s answered %d times", k, c)
		}
	}
}

// At the default log level, the Kafka client's chatter stays out and the
// banner comes after the start-up lines: it is the last thing on screen
// before the progress.
func TestDevBannerIsLastBeforeProgress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var screen testkit.SyncBuffer // one screen for stdout and stderr, written from several goroutines
	code := run(ctx, env{stdin: strings.NewReader(""), stdout: &screen, stderr: &screen, lookup: func(string) (string, bool) { return "", false }},
		[]string{"dev", "--data-dir", t.TempDir(), "--kafka-addr", "127.0.0.1:0", "--registry-addr", "127.0.0.1:0",
			"--sim-addr", "127.0.0.1:0", "--metrics-addr", "", "--partitions", "2", "--members", "20",
			"--demo", "10", "--exit-when-done"})
	out := screen.String()
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	banner := strings.Index(out, "loyalty-bridge dev —")
	progress := strings.Index(out, "events answered")
	if banner < 0 || progress < banner {
		t.Fatalf("no banner before the progress:\n%s", out)
	}
	if assigned := strings.LastIndex(out[:progress], "partitions assigned"); assigned > banner {
		t.Errorf("start-up lines after the banner:\n%s", out)
	}
	if strings.Contains(out, "\tkafka\t") {
		t.Errorf("the Kafka client logs at info:\n%s", out)
	}
}

// The banner's metrics line names the address dev serves /healthz on, and
// it answers there while dev runs; without --metrics-addr the line is left
// out rather than showing an address that answers nothing.
func TestDevBannerServesHealth(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var screen testkit.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, env{stdin: strings.NewReader(""), stdout: &screen, stderr: &screen, lookup: func(string) (string, bool) { return "", false }},
			[]string{"dev", "--data-dir", t.TempDir(), "--kafka-addr", "127.0.0.1:0", "--registry-addr", "127.0.0.1:0",
				"--sim-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--partitions", "2", "--members", "20", "--log-level", "warn"})
	}()
	line := regexp.MustCompile(`Metrics, health +http://(127\.0\.0\.1:\d+)/metrics`)
	var addr string
	for deadline := time.Now().Add(2 * time.Minute); addr == ""; {
		if m := line.FindStringSubmatch(screen.String()); m != nil {
			addr = m[1]
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("no metrics line with an address in the banner:\n%s", screen.String())
		}
		time.Sleep(50 * time.Millisecond) // polling the screen, not synchronising
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("the banner's address does not answer: %v\n%s", err, screen.String())
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz at the banner's address: %s", resp.Status)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("dev did not stop")
	}

	code, out, errs := devRun(t, t.TempDir(), "--demo", "5", "--exit-when-done") // devRun passes --metrics-addr ""
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	if strings.Contains(out, "Metrics, health") {
		t.Errorf("a metrics line without a server:\n%s", out)
	}
}

// dev --tracing stdout shows each record's trace on standard output: the
// spans of a purchase, from its processing to its partner call, as JSON.
// A bad --tracing is a usage error.
func TestDevTracingStdout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out testkit.SyncBuffer // the exporter writes from its own goroutine
	var errb bytes.Buffer
	args := []string{"dev", "--data-dir", t.TempDir(), "--kafka-addr", "127.0.0.1:0", "--registry-addr", "127.0.0.1:0",
		"--sim-addr", "127.0.0.1:0", "--metrics-addr", "", "--partitions", "2", "--members", "20", "--log-level", "warn",
		"--demo", "3", "--exit-when-done", "--tracing", "stdout"}
	code := run(ctx, env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, lookup: func(string) (string, bool) { return "", false }}, args)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	purchase := codec.DefaultTopics().Purchase
	for _, want := range []string{`"Name":"` + purchase + ` process"`, `"Name":"partner point-accrual"`, `"Name":"` + purchase + `.result publish"`} {
		if !strings.Contains(strings.ReplaceAll(out.String(), `": "`, `":"`), want) {
			t.Errorf("stdout lacks the span %s", want)
		}
	}
	if code, _, errs := devRun(t, t.TempDir(), "--tracing", "zipkin"); code != 2 || !strings.Contains(errs, "--tracing") {
		t.Errorf("--tracing zipkin: exit %d, %q; want 2 naming the flag", code, errs)
	}
}
