package testkit

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"go.uber.org/goleak"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/realkafka"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// partitions returns the partition count of each topic k lists, and the
// number of brokers.
func describe(t *testing.T, k *Kafka) (map[string]int, int) {
	t.Helper()
	adm := kadm.NewClient(k.Client(t))
	md, err := adm.Metadata(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, td := range md.Topics {
		got[td.Topic] = len(td.Partitions)
	}
	return got, len(md.Brokers)
}

func TestStartKafka(t *testing.T) {
	for _, tc := range []struct {
		name        string
		o           KafkaOptions
		wantTopics  map[string]int
		wantBrokers int
	}{
		{"zero value: one broker, no topics", KafkaOptions{}, map[string]int{}, 1},
		{"topic sets, each its partitions", KafkaOptions{Topics: []TopicSet{{2, []string{"a", "b"}}, {1, []string{"c"}}}},
			map[string]int{"a": 2, "b": 2, "c": 1}, 1},
		{"brokers", KafkaOptions{Brokers: 3, Topics: []TopicSet{{1, []string{"a"}}}}, map[string]int{"a": 1}, 3},
		{"kfake options after", KafkaOptions{Fake: []kfake.Opt{kfake.SeedTopics(4, "d")}}, map[string]int{"d": 4}, 1},
		// Without LOYALTY_BRIDGE_TEST_BROKERS, Real is kfake all the same.
		{"real wanted, none named", KafkaOptions{Real: true, Topics: []TopicSet{{3, []string{"e"}}}}, map[string]int{"e": 3}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(realkafka.EnvBrokers, "")
			k := StartKafka(t, tc.o)
			if k.Fake == nil {
				t.Fatal("no kfake cluster")
			}
			topics, brokers := describe(t, k)
			if brokers != tc.wantBrokers || len(topics) != len(tc.wantTopics) {
				t.Fatalf("%d brokers, topics %v; want %d, %v", brokers, topics, tc.wantBrokers, tc.wantTopics)
			}
			for name, n := range tc.wantTopics {
				if topics[name] != n {
					t.Fatalf("topics %v, want %v", topics, tc.wantTopics)
				}
			}
		})
	}
}

// With Real and a cluster named, the topics are seeded there (the
// names are the test's own, as on any shared cluster).
func TestStartKafkaOnARealCluster(t *testing.T) {
	seeds := realkafka.Brokers(t)
	name := realkafka.Name(t, "tk")
	k := StartKafka(t, KafkaOptions{Real: true, Topics: []TopicSet{{2, []string{name}}}})
	if k.Fake != nil || !slices.Equal(k.Brokers, seeds) {
		t.Fatalf("Kafka %+v, want the real cluster %v", k, seeds)
	}
	if topics, _ := describe(t, k); topics[name] != 2 {
		t.Fatalf("topics %v, want %s with 2 partitions", topics, name)
	}
}

func TestStartKafkaFailsNamingKafka(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	msg := runFake(t, func(tb testing.TB) { StartKafka(tb, KafkaOptions{Fake: []kfake.Opt{kfake.Ports(port)}}) })
	if !strings.Contains(msg, "kfake cluster did not start") {
		t.Fatalf("failure %q, want it to name the kfake cluster", msg)
	}
}

func TestStartEvents(t *testing.T) {
	for _, tc := range []struct {
		name   string
		o      EventsOptions
		topics codec.Topics
		parts  int
	}{
		{"defaults", EventsOptions{}, codec.DefaultTopics(), 1},
		{"named topics, partitions", EventsOptions{Topics: codec.Topics{Purchase: "p", RefundRedemption: "r", MemberOnboarding: "m"}, Partitions: 2},
			codec.Topics{Purchase: "p", RefundRedemption: "r", MemberOnboarding: "m"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := StartEvents(t, tc.o)
			if e.Topics != tc.topics {
				t.Fatalf("topics %+v, want %+v", e.Topics, tc.topics)
			}
			got, _ := describe(t, e.Kafka)
			for _, name := range tc.topics.All() {
				if got[name] != tc.parts {
					t.Fatalf("topics %v, want each of %v with %d partitions", got, tc.topics.All(), tc.parts)
				}
			}
			// The codec encodes for its topics, with schemas registered.
			ev := &events.PurchaseCompleted{TransactionID: "T-1", LoyaltyID: sim.MemberID(1), Amount: 1000,
				TransactionDate: time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)}
			v, err := e.Codec.Encode(tc.topics.Purchase, ev)
			if err != nil {
				t.Fatal(err)
			}
			back, err := e.Codec.Decode(ctx(t), tc.topics.Purchase, v)
			if p, ok := back.(*events.PurchaseCompleted); err != nil || !ok || p.TransactionID != "T-1" {
				t.Fatalf("decoded %#v, %v", back, err)
			}
			subjects, err := e.Registry.Client.Subjects(ctx(t))
			if err != nil || len(subjects) == 0 {
				t.Fatalf("registry subjects %v, %v", subjects, err)
			}
		})
	}
}

// A codec that cannot register fails naming the registry.
func TestCodecFailsNamingTheRegistry(t *testing.T) {
	var url string
	msg := runFake(t, func(tb testing.TB) {
		r := StartRegistry(tb, RegistryOptions{Fake: []srfake.Option{srfake.WithAuth("Basic c2VjcmV0")}})
		url = r.URL
		r.Codec(tb, codec.Options{})
	})
	if !strings.Contains(msg, "did not register its schemas") || !strings.Contains(msg, url) {
		t.Fatalf("failure %q, want it to name the registry %s", msg, url)
	}
	// With its credentials, the same registry takes them.
	r := StartRegistry(t, RegistryOptions{Fake: []srfake.Option{srfake.WithAuth("Basic dTpw")}, Client: []sr.ClientOpt{sr.BasicAuth("u", "p")}})
	r.Codec(t, codec.Options{})
}

func TestPartner(t *testing.T) {
	for _, tc := range []struct {
		name     string
		password string
		check    func(t *testing.T, err error)
	}{
		{"demo credentials", "", func(t *testing.T, err error) {
			if err != nil {
				t.Fatalf("CustomerInfo: %v", err)
			}
		}},
		{"a wrong password", "wrong", func(t *testing.T, err error) {
			if ae := (*loyalty.AuthError)(nil); !errors.As(err, &ae) {
				t.Fatalf("CustomerInfo with a wrong password: %v, want an AuthError", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fronted atomic.Int64
			s := StartSim(t, SimOptions{Options: sim.Options{Members: 2}, Front: func(w http.ResponseWriter, r *http.Request, next http.Handler) {
				fronted.Add(1)
				next.ServeHTTP(w, r)
			}})
			c := NewClient(t, s, ClientOptions{Password: tc.password, Client: loyalty.Options{Retry: loyalty.RetryPolicy{MaxAttempts: 1}}})
			_, _, err := c.CustomerInfo(ctx(t), sim.MemberID(1))
			tc.check(t, err)
			if fronted.Load() == 0 || s.TokensIssued() == 0 && tc.password == "" {
				t.Fatalf("%d requests seen in front, %d tokens issued", fronted.Load(), s.TokensIssued())
			}
		})
	}
}

func TestEventually(t *testing.T) {
	for _, tc := range []struct {
		name     string
		after    int // cond holds from this call on; -1: never
		timeout  time.Duration
		wantFail string
	}{
		// Long deadlines where cond holds, so that a loaded machine cannot
		// fail them.
		{"at once", 0, time.Minute, ""},
		{"after a few polls", 3, time.Minute, ""},
		{"never", -1, 50 * time.Millisecond, "not within 50ms: 0 of 1 seen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			msg := runFake(t, func(tb testing.TB) {
				Eventually(tb, tc.timeout, func() (bool, string) {
					calls++
					return tc.after >= 0 && calls > tc.after, "0 of 1 seen"
				})
			})
			if msg != tc.wantFail {
				t.Fatalf("failure %q, want %q", msg, tc.wantFail)
			}
			if tc.after >= 0 && calls != tc.after+1 {
				t.Fatalf("cond asked %d times, want %d", calls, tc.after+1)
			}
		})
	}
}

func TestEventuallyTrueNamesWhat(t *testing.T) {
	msg := runFake(t, func(tb testing.TB) {
		EventuallyTrue(tb, 20*time.Millisecond, "the group joined", func() bool { return false })
	})
	if !strings.Contains(msg, "the group joined") {
		t.Fatalf("failure %q, want it to name the condition", msg)
	}
	if msg := runFake(t, func(tb testing.TB) { EventuallyTrue(tb, time.Second, "x", func() bool { return true }) }); msg != "" {
		t.Fatalf("failed %q on a condition that holds", msg)
	}
}

func TestSyncBuffer(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("x"))
				_ = b.String() // read while others write: -race checks it
			}
		})
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("x", 800) {
		t.Fatalf("%d bytes, want 800", len(got))
	}
}

type wrapped struct{ net.Conn }

func TestNetSwitch(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	var sw NetSwitch
	var wraps atomic.Int64
	sw.Wrap = func(c net.Conn) net.Conn { wraps.Add(1); return wrapped{c} }
	c, err := sw.Dial(ctx(t), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(wrapped); !ok || wraps.Load() != 1 {
		t.Fatalf("Dial gave %T, %d wraps; want it wrapped once", c, wraps.Load())
	}
	var server net.Conn
	select {
	case server = <-accepted:
		defer server.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("the listener did not accept the dialled connection")
	}
	sw.Cut()
	// The peer sees the connection end.
	_ = server.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := server.Read(make([]byte, 1)); err == nil || errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		t.Fatalf("peer read after Cut: %v, want the connection closed", err)
	}
	if _, err := sw.Dial(ctx(t), "tcp", ln.Addr().String()); !errors.Is(err, ErrNetworkCut) {
		t.Fatalf("Dial after Cut: %v, want ErrNetworkCut", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Every sets how often cond is asked: at 100 ms, 350 ms allow at most 5
// asks (at 0, 100, 200, 300 ms and the one past the deadline); at the
// default 5 ms, far more.
func TestEventuallyEvery(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    []PollOpt
		atMost  int
		atLeast int
	}{
		{"every 100ms", []PollOpt{Every(100 * time.Millisecond)}, 5, 2},
		{"default", nil, 1000, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asks := 0
			runFake(t, func(tb testing.TB) {
				Eventually(tb, 350*time.Millisecond, func() (bool, string) { asks++; return false, "never" }, tc.opts...)
			})
			if asks > tc.atMost || asks < tc.atLeast {
				t.Fatalf("asked %d times, want %d to %d", asks, tc.atLeast, tc.atMost)
			}
		})
	}
}

// A client's idle connections are closed after the simulator's server,
// so that no connection outlives the test (goleak in TestMain checks).
func TestSimAfterCloseRunsAfterTheServer(t *testing.T) {
	var order []string
	runFake(t, func(tb testing.TB) {
		s := StartSim(tb, SimOptions{Front: func(w http.ResponseWriter, r *http.Request, next http.Handler) {
			order = append(order, "request")
			next.ServeHTTP(w, r)
		}})
		s.AfterClose(func() {
			// The server is closed: a request fails.
			if resp, err := http.Get(s.URL + "/"); err == nil {
				resp.Body.Close()
				order = append(order, "served after close")
				return
			}
			order = append(order, "after close")
		})
	})
	if !slices.Equal(order, []string{"after close"}) {
		t.Fatalf("order %v, want the hook to run once the server refuses requests", order)
	}
}
