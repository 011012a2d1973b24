package topicseed

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestListed(t *testing.T) {
	partition := func(leader int32, code int16) kmsg.MetadataResponseTopicPartition {
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Leader, p.ErrorCode = leader, code
		return p
	}
	topic := func(code int16, ps ...kmsg.MetadataResponseTopicPartition) kmsg.MetadataResponseTopic {
		rt := kmsg.NewMetadataResponseTopic()
		rt.ErrorCode, rt.Partitions = code, ps
		return rt
	}
	led := partition(1, 0)
	for _, tc := range []struct {
		name       string
		topics     []kmsg.MetadataResponseTopic
		partitions int32
		want       bool
	}{
		{"all led", []kmsg.MetadataResponseTopic{topic(0, led, led), topic(0, led, led)}, 2, true},
		{"any count", []kmsg.MetadataResponseTopic{topic(0, led), topic(0, led, led, led)}, 0, true},
		{"wrong count", []kmsg.MetadataResponseTopic{topic(0, led), topic(0, led, led)}, 2, false},
		{"no partitions yet", []kmsg.MetadataResponseTopic{topic(0), topic(0, led)}, 0, false},
		{"unknown to this broker", []kmsg.MetadataResponseTopic{topic(kerr.UnknownTopicOrPartition.Code), topic(0, led)}, 0, false},
		{"no leader", []kmsg.MetadataResponseTopic{topic(0, led, partition(-1, 0)), topic(0, led, led)}, 2, false},
		{"partition error", []kmsg.MetadataResponseTopic{topic(0, led, partition(1, kerr.LeaderNotAvailable.Code)), topic(0, led, led)}, 2, false},
		{"a topic missing", []kmsg.MetadataResponseTopic{topic(0, led, led)}, 2, false},
	} {
		resp := kmsg.NewPtrMetadataResponse()
		resp.Topics = tc.topics
		if got := listed(resp, tc.partitions, 2); got != tc.want {
			t.Errorf("%s: listed = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Create over the wire, on kfake's three brokers: the topics are made,
// waited for and deletable; a second Create of the same topics fails
// unless existingOK, and then keeps their partition count.
func TestCreate(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	rf, err := ReplicationFactor(ctx, cl)
	if err != nil || rf != 3 {
		t.Fatalf("ReplicationFactor = %d, %v; want 3", rf, err)
	}
	topics := []string{"a", "a.result"}
	created, err := Create(ctx, cl, 2, rf, false, topics...)
	if err != nil || len(created) != 2 {
		t.Fatalf("Create = %v, %v", created, err)
	}
	if created, err := Create(ctx, cl, 2, rf, false, topics...); !errors.Is(err, kerr.TopicAlreadyExists) || len(created) != 0 {
		t.Fatalf("second Create = %v, %v; want TOPIC_ALREADY_EXISTS", created, err)
	}
	if created, err := Create(ctx, cl, 5, rf, true, topics...); err != nil || len(created) != 0 {
		t.Fatalf("second Create, existing allowed = %v, %v", created, err)
	}
	details, err := kadm.NewClient(cl).ListTopics(ctx, topics...)
	if err != nil {
		t.Fatal(err)
	}
	for _, td := range details {
		if len(td.Partitions) != 2 {
			t.Errorf("%s has %d partitions, want the 2 it was made with", td.Topic, len(td.Partitions))
		}
	}
	if err := Delete(ctx, cl, topics...); err != nil {
		t.Fatal(err)
	}
	if err := Delete(ctx, cl, topics...); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("second Delete: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
}
