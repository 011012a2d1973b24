package devstack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/topicseed"
)

func (s *Stack) startKfake(opts Options) error {
	host, port, err := splitHostPort(opts.KafkaAddr)
	if err != nil {
		return fmt.Errorf("kafka address: %w", err)
	}
	kopts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(port),
		kfake.DefaultNumPartitions(int(opts.Partitions)),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return net.Listen(network, net.JoinHostPort(host, strconv.Itoa(port)))
		}),
	}
	if opts.DataDir != "" {
		kopts = append(kopts, kfake.DataDir(filepath.Join(opts.DataDir, "kafka")))
	}
	s.Cluster, err = kfake.NewCluster(kopts...)
	if err != nil {
		return fmt.Errorf("kafka on %s: %w", opts.KafkaAddr, err)
	}
	s.Brokers = s.Cluster.ListenAddrs()
	for _, t := range opts.Topics {
		if err := s.Cluster.CreateTopic(t, opts.Partitions, nil); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", t, err)
		}
	}
	return nil
}

// useExternal creates the stack's topics on the cluster at opts.Brokers.
// kfake answers for a topic the moment it is created; a real cluster does
// so a moment later on each broker, so this waits (topicseed) rather than
// let the first client wait out its metadata back-off.
func (s *Stack) useExternal(ctx context.Context, opts Options) error {
	s.Brokers = append([]string(nil), opts.Brokers...)
	if len(opts.Topics) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Brokers...))
	if err != nil {
		return fmt.Errorf("kafka %v: %w", s.Brokers, err)
	}
	defer cl.Close()
	rf, err := topicseed.ReplicationFactor(ctx, cl)
	if err != nil {
		return fmt.Errorf("kafka %v: %w", s.Brokers, err)
	}
	if _, err := topicseed.Create(ctx, cl, opts.Partitions, rf, true, opts.Topics...); err != nil {
		return fmt.Errorf("kafka %v: %w", s.Brokers, err)
	}
	return nil
}
