// Command loyalty-bridge is the Kafka ↔ Partner Loyalty Points API bridge and
// its operator CLI. main only wires: each subcommand lives in its own file,
// parses its flags and calls into internal/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/apicall"
)

// env is what a subcommand may touch of the outside world; tests pass their
// own.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	lookup func(string) (string, bool)
	// tick is how often progress lines are drawn on schedule (0: their
	// default, 2 s); tests shorten it.
	tick time.Duration
	// kafka are added to replay's Kafka clients; tests record their
	// requests with it.
	kafka []kgo.Opt
}

type command struct {
	summary string
	run     func(ctx context.Context, e env, args []string) error
}

// commands is built per call so that no package-level state is mutable.
func commands() map[string]command {
	m := map[string]command{
		"run":       runCommand(),
		"replay":    replayCommand(),
		"offsets":   offsetsCommand(),
		"schemas":   schemasCommand(),
		"produce":   produceCommand(),
		"tail":      tailCommand(),
		"reconcile": reconcileCommand(),
		"api":       {summary: "call a partner API endpoint by hand (token, profile, accrue, lookup, ...)", run: runAPI},
	}
	addDev(m)
	return m
}

// exitError carries a specific exit code (e.g. 2 for usage errors).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageIf makes err a usage error (exit 2) when it is a T: a value that
// names nothing there is (a partition, a group, a window of a topic), a
// setting whose file cannot be used.
func usageIf[T error](err error) error {
	var t T
	if errors.As(err, &t) {
		return &exitError{code: exitUsage, err: err}
	}
	return err
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, lookup: os.LookupEnv}, os.Args[1:])
	stop()
	os.Exit(code)
}

func run(ctx context.Context, e env, args []string) int {
	cmds := commands()
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(e.stderr, cmds)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(e.stderr, "loyalty-bridge: unknown command %q\n\n", args[0])
		usage(e.stderr, cmds)
		return 2
	}
	err := cmd.run(ctx, e, args[1:])
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	}
	fmt.Fprintf(e.stderr, "loyalty-bridge %s: %v\n", args[0], err)
	var ee *exitError
	if !errors.As(err, &ee) {
		return exitFailed
	}
	if ee.code == exitUsage {
		name := args[0]
		if _, ok := apicall.Calls()[args[min(1, len(args)-1)]]; ok && name == "api" {
			name += " " + args[1]
		}
		fmt.Fprintf(e.stderr, "see 'loyalty-bridge %s --help'\n", name)
	}
	return ee.code
}

// Exit codes, the same for every command (docs/operating.md's table); api adds
// 3 to 5 for the partner's answers.
const (
	exitFailed = 1 // it ran, and something failed or was not done
	exitUsage  = 2 // the command line is wrong; nothing was done
)

// parseFlags runs parse, a parse of fs's flags (and environment, file),
// quietly: -h prints the command's help (fs.Usage) and returns
// flag.ErrHelp; any other problem is a usage error that says the one
// problem, which run follows with a pointer to --help, not the whole help.
func parseFlags(fs *flag.FlagSet, parse func() error) error {
	usage, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := parse()
	fs.Usage = usage
	fs.SetOutput(out)
	switch {
	case errors.Is(err, flag.ErrHelp):
		if usage != nil {
			usage()
		} else {
			fmt.Fprintf(out, "usage of loyalty-bridge %s:\n", fs.Name())
			fs.PrintDefaults()
		}
		return flag.ErrHelp
	case err != nil:
		return &exitError{code: exitUsage, err: err}
	}
	return nil
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: loyalty-bridge <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	for _, n := range slices.Sorted(maps.Keys(cmds)) {
		fmt.Fprintf(w, "  %-10s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'loyalty-bridge <command> -h' for a command's flags.")
	fmt.Fprintln(w, "Exit status: 0 done, 1 it ran and something failed, 2 usage (nothing done); api also 3-5.")
}
