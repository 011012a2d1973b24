package pipeline_test

import (
	"context"
	"errors"
	"os/signal"
	"syscall"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/ordering"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
)

// The bridge's shape: a handler that answers every input on <topic>.result,
// a fallback that turns bugs into <topic>.error records, and a gate (the
// circuit breaker) that holds records while the partner API is down.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	p, err := pipeline.New(pipeline.Options{
		Brokers: []string{"localhost:9092"},
		Group:   "loyalty-bridge",
		Topics:  []string{"loyalty.purchase"},
		Mode:    ordering.Key,
		Handler: func(ctx context.Context, rec *kgo.Record, meta pipeline.Meta) ([]*kgo.Record, error) {
			// decode, validate, (if meta.Fresh) look up before calling, call
			// the API, encode the outcome...
			return []*kgo.Record{{Topic: rec.Topic + ".result", Key: rec.Key, Value: []byte("outcome")}}, nil
		},
		Fallback: func(rec *kgo.Record, cause error) ([]*kgo.Record, error) {
			kind := "INTERNAL"
			if errors.Is(cause, pipeline.ErrProduce) {
				kind = "INTERNAL_PRODUCE"
			}
			return []*kgo.Record{{Topic: rec.Topic + ".error", Key: rec.Key, Value: []byte(kind)}}, nil
		},
		Gate:   nil, // e.g. a *circuit.Breaker
		Logger: zap.NewExample(),
	})
	if err != nil {
		panic(err) // configuration errors, all of them at once
	}
	if err := p.Run(ctx); err != nil {
		panic(err) // a record that could not be turned into any output
	}
}
