package offsets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const topic = "loyalty.purchase"

// cluster is a kfake cluster over TCP with topic (2 partitions) holding
// records 0..4 on each partition, partition p's record i stamped
// t0 + (2i+p) minutes, and an admin client.
func cluster(t *testing.T, t0 time.Time) (*kfake.Cluster, *kadm.Client) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.SeedTopics(2, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte(fmt.Sprint(i)),
			Timestamp: t0.Add(time.Duration(i) * time.Minute)})
	}
	if err := cl.ProduceSync(ctx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return c, kadm.NewClient(cl)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func commit(t *testing.T, adm *kadm.Client, group string, p int32, at int64) {
	t.Helper()
	var o kadm.Offsets
	o.AddOffset(topic, p, at, -1)
	resp, err := adm.CommitOffsets(ctx(t), group, o)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
}

func TestLag(t *testing.T) {
	_, adm := cluster(t, time.Now())
	commit(t, adm, "g", 0, 3)
	r, err := Lag(ctx(t), adm, "g", []string{topic})
	if err != nil {
		t.Fatal(err)
	}
	want := []Row{{topic, 0, 3, 5, 2}, {topic, 1, -1, 5, 5}}
	if r.Group != "g" || r.State != "Empty" || len(r.Members) != 0 || fmt.Sprint(r.Rows) != fmt.Sprint(want) {
		t.Fatalf("report %+v, want rows %v", r, want)
	}
	var out bytes.Buffer
	r.Print(&out)
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	want2 := []string{"group g: Empty, 0 members", "TOPIC PARTITION COMMITTED END LAG",
		"loyalty.purchase 0 3 5 2", "loyalty.purchase 1 - 5 5", "total 7"}
	if fmt.Sprint(lines) != fmt.Sprint(want2) {
		t.Errorf("output:\n%s", out.String())
	}

	r, err = Lag(ctx(t), adm, "nobody", []string{topic})
	out.Reset()
	r.Print(&out)
	if err != nil || r.State != "" || !strings.Contains(out.String(), "group nobody: unknown to the cluster") {
		t.Fatalf("unknown group: %v\n%s", err, out.String())
	}

	// Show refuses it, naming the groups there are.
	commit(t, adm, "h", 1, 1)
	out.Reset()
	err = Show(ctx(t), adm, &out, "nobody", []string{topic})
	var ng *NoGroupError
	if !errors.As(err, &ng) || err.Error() != `no such group "nobody" (never committed, or expired); the cluster has 2 groups: g, h` || out.Len() != 0 {
		t.Fatalf("Show of an unknown group: %v\n%s", err, out.String())
	}
	if err := Show(ctx(t), adm, &out, "g", []string{topic}); err != nil || !strings.Contains(out.String(), "group g: Empty") {
		t.Fatalf("Show: %v\n%s", err, out.String())
	}
}

func TestReset(t *testing.T) {
	t0 := time.Now().Add(-time.Hour).Truncate(time.Minute)
	_, adm := cluster(t, t0)
	commit(t, adm, "g", 0, 5)
	for _, tc := range []struct {
		name      string
		partition int32
		to        Target
		want      []Move
	}{
		{"earliest", -1, ToEarliest(), []Move{{0, 5, 0, false, 0, 5}, {1, -1, 0, false, 0, 5}}},
		// Partition 0 holds records stamped t0, t0+2m, …: the first at
		// or after t0+3m is its offset 2.
		{"time", 0, ToTime(t0.Add(3 * time.Minute)), []Move{{0, 0, 2, false, 0, 5}}},
		{"time past the end", 1, ToTime(t0.Add(time.Hour)), []Move{{1, 0, 5, false, 0, 5}}},
		{"offset", 1, ToOffset(3), []Move{{1, 5, 3, false, 0, 5}}},
		{"offset past the end", 1, ToOffset(99), []Move{{1, 3, 5, true, 0, 5}}},
		{"latest", -1, ToLatest(), []Move{{0, 2, 5, false, 0, 5}, {1, 5, 5, false, 0, 5}}},
	} {
		got, err := Reset(ctx(t), adm, "g", topic, tc.partition, tc.to)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Fatalf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
		r, err := Lag(ctx(t), adm, "g", []string{topic})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range tc.want {
			if c := r.Rows[m.Partition].Committed; c != m.To {
				t.Errorf("%s: partition %d committed %d after the reset, want %d", tc.name, m.Partition, c, m.To)
			}
		}
	}
	// A group that never committed can be positioned before it starts.
	if got, err := Reset(ctx(t), adm, "new", topic, 1, ToOffset(2)); err != nil || fmt.Sprint(got) != fmt.Sprint([]Move{{1, -1, 2, false, 0, 5}}) {
		t.Fatalf("reset of a new group: %v, %v", got, err)
	}
	var out bytes.Buffer
	PrintMoves(&out, "g", topic, []Move{{0, -1, 3, false, 0, 5}, {1, 4, 0, false, 0, 5}})
	if want := "group g: loyalty.purchase reset\n  partition 0: - -> 3\n  partition 1: 4 -> 0\n"; out.String() != want {
		t.Errorf("PrintMoves:\n%s", out.String())
	}
	_, err := Reset(ctx(t), adm, "g", topic, 7, ToEarliest())
	var np *NoPartitionError
	if !errors.As(err, &np) || err.Error() != "topic loyalty.purchase has no partition 7" {
		t.Fatalf("missing partition: %v", err)
	}
}

// A group with a live member is not idle, and the broker refuses a reset
// from outside it.
func TestLiveMember(t *testing.T) {
	c, adm := cluster(t, time.Now())
	member, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumerGroup("g"), kgo.ConsumeTopics(topic),
		kgo.ClientID("bridge-1"))
	if err != nil {
		t.Fatal(err)
	}
	polled := make(chan struct{})
	go func() { // the member joins when it polls, and polls until closed
		defer close(polled)
		for !member.PollFetches(context.Background()).IsClientClosed() {
		}
	}()
	defer func() { member.Close(); <-polled }()

	deadline := time.Now().Add(20 * time.Second)
	for {
		err = Idle(ctx(t), adm, "g")
		if err != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	var live *LiveMembersError
	if !errors.As(err, &live) || len(live.Members) != 1 || !strings.HasPrefix(live.Members[0], "bridge-1@") ||
		!strings.HasPrefix(err.Error(), "group g has 1 live member (bridge-1@") {
		t.Fatalf("Idle with a member: %v", err)
	}
	if _, err := Reset(ctx(t), adm, "g", topic, -1, ToEarliest()); err == nil || !strings.Contains(err.Error(), "the broker refused the reset: group g is not empty") {
		t.Fatalf("reset of a live group: %v", err)
	}
	if err := Idle(ctx(t), adm, "nobody"); err != nil {
		t.Fatalf("Idle of an unknown group: %v", err)
	}
}
