package testkit

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
)

// RegistryOptions configures StartRegistry. The zero value is an srfake
// registry without authentication and a client without credentials.
type RegistryOptions struct {
	Fake   []srfake.Option // e.g. srfake.WithAuth
	Client []sr.ClientOpt  // e.g. sr.BasicAuth, after sr.URLs
}

// Registry is a running srfake Schema Registry and a client of it.
type Registry struct {
	URL    string
	Fake   *srfake.Registry
	Client *sr.Client
}

// StartRegistry starts an srfake registry, closed when tb ends.
func StartRegistry(tb testing.TB, o RegistryOptions) *Registry {
	tb.Helper()
	reg := srfake.New(o.Fake...)
	tb.Cleanup(reg.Close)
	cl, err := sr.NewClient(append([]sr.ClientOpt{sr.URLs(reg.URL())}, o.Client...)...)
	if err != nil {
		tb.Fatalf("testkit: Schema Registry client for %s: %v", reg.URL(), err)
	}
	return &Registry{URL: reg.URL(), Fake: reg, Client: cl}
}

// CodecTimeout bounds the registration of the codec's schemas.
const CodecTimeout = 30 * time.Second

// Codec returns a codec over r with o's settings, its schemas registered
// (o.Registry and o.Register are set here).
func (r *Registry) Codec(tb testing.TB, o codec.Options) *codec.Codec {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), CodecTimeout)
	defer cancel()
	o.Registry, o.Register = r.Client, true
	cd, err := codec.New(ctx, o)
	if err != nil {
		tb.Fatalf("testkit: codec over %s did not register its schemas: %v", r.URL, err)
	}
	return cd
}

// EventsOptions configures StartEvents. The zero value is the default
// topics with one partition each on a one-broker kfake cluster.
type EventsOptions struct {
	// Topics are the input topics (an empty name: its default). All of
	// them, results and errors included, are created.
	Topics codec.Topics
	// Partitions of each of Topics (default 1).
	Partitions int32
	// Kafka is the cluster's configuration; Topics are added to its own.
	Kafka KafkaOptions
	// Codec is the codec's configuration; its Topics are Topics.
	Codec codec.Options
}

// Events is Kafka with the bridge's topics, a registry, and a codec with
// its schemas registered there: what the event tools (produce, tail,
// replay, reconcile, demo) and the bridge run on.
type Events struct {
	*Kafka
	Registry *Registry
	Codec    *codec.Codec
	Topics   codec.Topics
}

// StartEvents starts Kafka, the registry and the codec, all torn down when
// tb ends.
func StartEvents(tb testing.TB, o EventsOptions) *Events {
	tb.Helper()
	o.Topics = o.Topics.WithDefaults()
	if o.Partitions == 0 {
		o.Partitions = 1
	}
	ko := o.Kafka
	ko.Topics = append(append([]TopicSet(nil), ko.Topics...), TopicSet{Partitions: o.Partitions, Names: o.Topics.All()})
	e := &Events{Kafka: StartKafka(tb, ko), Registry: StartRegistry(tb, RegistryOptions{}), Topics: o.Topics}
	co := o.Codec
	co.Topics = o.Topics
	e.Codec = e.Registry.Codec(tb, co)
	return e
}
