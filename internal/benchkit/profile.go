package benchkit

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"

	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/service"
)

// KindBridge runs the bridge inside a worker process under the CPU
// profiler: the same service (internal/service) `loyalty-bridge run`
// starts, configured by the same flags, so a profile shows where the
// bridge's time goes. Measurements come from the real binary; this kind
// is only used with Config.BridgeProfile.
const KindBridge = "bridge"

// runProfiledBridge parses spec.BridgeArgs as `loyalty-bridge run` does,
// runs the service until ctx ends and writes a CPU profile of it to
// spec.Profile.
func runProfiledBridge(ctx context.Context, spec WorkerSpec) (WorkerResult, error) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg, b := config.Define(fs)
	none := func(string) (string, bool) { return "", false }
	if err := b.Parse(spec.BridgeArgs, none); err != nil {
		return WorkerResult{}, fmt.Errorf("bridge flags: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return WorkerResult{}, fmt.Errorf("bridge flags: %w", err)
	}
	f, err := os.Create(spec.Profile)
	if err != nil {
		return WorkerResult{}, err
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return WorkerResult{}, err
	}
	defer pprof.StopCPUProfile()
	svc, err := service.New(ctx, cfg, service.Options{})
	if err != nil {
		return WorkerResult{}, err
	}
	defer svc.Close()
	if err := svc.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return WorkerResult{}, err
	}
	return WorkerResult{}, nil
}
