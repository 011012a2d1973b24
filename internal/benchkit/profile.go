package benchkit

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

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
// spec.Profile, a heap profile taken near the heap's peak beside it
// (…-heap.pprof), and one taken when the service has stopped
// (…-allocs.pprof), whose allocation samples cover the whole run:
// `go tool pprof -sample_index=alloc_objects` divided by the records is
// allocations per record.
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
	hctx, stopHeap := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { heapAtPeak(hctx, strings.TrimSuffix(spec.Profile, ".pprof")+"-heap.pprof") })
	defer func() { stopHeap(); wg.Wait() }()
	if err := svc.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return WorkerResult{}, err
	}
	if err := writeAllocs(strings.TrimSuffix(spec.Profile, ".pprof") + "-allocs.pprof"); err != nil {
		return WorkerResult{}, err
	}
	return WorkerResult{}, nil
}

// writeAllocs writes the allocations of the whole run so far to path.
func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("allocs profile %s: %w", path, err)
	}
	return f.Close()
}

// heapAtPeak writes a heap profile to path whenever the live heap has
// grown by a tenth over the last one written, so that the file ends up
// showing what the heap held near its peak.
func heapAtPeak(ctx context.Context, path string) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	var peak uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc < peak+peak/10 {
			continue
		}
		peak = ms.HeapAlloc
		f, err := os.Create(path)
		if err != nil {
			return
		}
		_ = pprof.Lookup("heap").WriteTo(f, 0)
		f.Close()
	}
}
