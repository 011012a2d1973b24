package replay_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/replay"
	"github.com/loyalty-bridge/loyalty-bridge/internal/service"
)

// Reprocess what failed on the purchase topic during an outage, paced so
// that the live bridges keep most of the partner API, as `loyalty-bridge
// replay --from-errors loyalty.purchase.error --since 2h --rate 50` does.
func Example() {
	ctx := context.Background()
	var cfg *config.Config // parsed and validated as `run` does
	deps, err := service.Connect(ctx, cfg, service.Options{})
	if err != nil {
		panic(err)
	}
	defer deps.Close()
	br, err := deps.Bridge(true) // the guard always on, outputs marked replayed
	if err != nil {
		panic(err)
	}
	r, err := replay.New(replay.Options{Kafka: deps.KafkaOpts, Codec: deps.Codec, Handle: br.Handle, Fallback: br.Fallback,
		Inputs: codec.DefaultTopics().Inputs(),                             // the configured input topics: error events naming others are refused
		Rate:   50, WaitingFor: deps.WaitingFor, MaxWait: 10 * time.Minute, // give up while the partner is still down
		Progress: func(p replay.Progress) {
			fmt.Fprintf(os.Stderr, "%d/%d %s\n", p.Done, p.Planned, p.Note())
		}})
	if err != nil {
		panic(err)
	}
	defer r.Close()
	sum, err := r.FromErrors(ctx, "loyalty.purchase.error", replay.ErrorFilter{Since: time.Now().Add(-2 * time.Hour)})
	if err != nil {
		panic(err)
	}
	fmt.Print(sum.Table())
	if !sum.OK() {
		os.Exit(1)
	}
}
