// Command loyalty-healthcheck is the container image's health probe: it
// GETs one URL and exits 0 when the answer is 2xx, 1 otherwise (2 for bad
// usage).
//
// The runtime image is distroless: no shell, no curl. Docker Compose runs a
// health check inside the container, so the image carries this instead:
//
//	healthcheck: {test: ["CMD", "/usr/local/bin/loyalty-healthcheck", "http://127.0.0.1:9464/readyz"]}
//
// Kubernetes probes the same endpoints with httpGet and does not use it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("loyalty-healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 3*time.Second, "time limit of the whole check")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: loyalty-healthcheck [--timeout D] URL")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 || *timeout <= 0 {
		fs.Usage()
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := check(ctx, fs.Arg(0)); err != nil {
		fmt.Fprintf(stderr, "loyalty-healthcheck: %v\n", err)
		return 1
	}
	return 0
}

func check(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return errors.New(resp.Status)
	}
	return nil
}
